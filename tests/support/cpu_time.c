#include "cpu_time.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

double cpu_of(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, sizeof buf, f)) {
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* after the command: state ppid pgrp session tty tpgid flags minflt
     * cminflt majflt cmajflt utime stime */
    if (p)
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

double self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static long status_kib(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = 0;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            sscanf(line + n + 1, "%ld", &v);
            break;
        }
    if (f)
        fclose(f);
    return v;
}

long peak_rss_kib(pid_t pid)
{
    return status_kib(pid, "VmHWM");
}

long rss_kib(pid_t pid)
{
    return status_kib(pid, "VmRSS");
}

long vm_size_kib(pid_t pid)
{
    return status_kib(pid, "VmSize");
}

long long nng_thread_switches(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    long long total = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[400], line[128];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s/comm", dir, e->d_name);
        FILE *f = fopen(path, "r");
        int nng = f && fgets(line, sizeof line, f) && strncmp(line, "nng:", 4) == 0;
        if (f)
            fclose(f);
        if (!nng)
            continue;
        snprintf(path, sizeof path, "%s/%s/status", dir, e->d_name);
        f = fopen(path, "r");
        long long v;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %lld", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %lld", &v) == 1)
                total += v;
        if (f)
            fclose(f);
    }
    closedir(d);
    return total;
}
