/* The database (server/db/db.c): created at the newest schema, migrated
 * from older ones with data kept, newer ones refused, one coordinator per
 * file. */
#include "db/db.h"
#include "failure.h"
#include "groups/groups.h"
#include "db/schema.h"
#include "store/store.h"

#include "check_main.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64], path[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/c10d-schema-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static int scalar(sqlite3 *h, const char *sql)
{
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
    int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    return v;
}

/* The file as a schema-`version` coordinator left it, holding what the
 * SQL `rows` puts in it; then opened by this coordinator, which migrates
 * it to the newest schema. */
static void migrated_from(c10ds_db *db, int version, const char *rows)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    for (int i = 0; i < version; i++)
        ck_assert_int_eq(sqlite3_exec(h, c10ds_migrations[i].sql, NULL, NULL, NULL), SQLITE_OK);
    char *sql = sqlite3_mprintf("%s; PRAGMA user_version = %d", rows, version);
    ck_assert_int_eq(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(sql);
    sqlite3_close(h);
    ck_assert_msg(c10ds_db_open(db, path) == 0, "%s", c10ds_failure());
    ck_assert_int_eq(db->schema_version, c10ds_migration_count);
}

START_TEST(migrations_are_numbered_without_gaps)
{
    ck_assert_int_ge(c10ds_migration_count, 2);
    for (int i = 0; i < c10ds_migration_count; i++)
        ck_assert_int_eq(c10ds_migrations[i].version, i + 1);
}
END_TEST

START_TEST(fresh_database_gets_newest_schema_in_wal)
{
    c10ds_db db;
    ck_assert_int_eq(c10ds_db_open(&db, path), 0);
    ck_assert_int_eq(db.schema_version, c10ds_migration_count);
    ck_assert_int_eq(scalar(db.h, "PRAGMA user_version"), c10ds_migration_count);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db.h, "PRAGMA journal_mode", -1, &st, NULL);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM applied_requests"), 0);
    c10ds_db_close(&db);
}
END_TEST

START_TEST(version_1_database_is_migrated_with_its_data)
{
    /* Build a version-1 database by hand, as an older coordinator left it. */
    c10ds_db db;
    migrated_from(&db, 1, "INSERT INTO kv VALUES('old', x'0102', 1)");
    ck_assert_int_eq(scalar(db.h, "SELECT length(value) FROM kv WHERE key = 'old'"), 2);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM applied_requests"), 0);
    c10ds_db_close(&db);
}
END_TEST

/* Schema 8: a group's ranks were a comma-separated text in groups.ranks
 * ("" for the world in order); they become group_ranks rows, and the hash
 * an arrival is compared by is made from them at the group's first read. */
START_TEST(version_7_groups_ranks_text_becomes_rows)
{
    c10ds_db db;
    migrated_from(&db, 7,
                  "INSERT INTO groups(job, generation, name, ranks, size, "
                  "joined, formed, secret) VALUES('j', 1, 'world', '', 6, 6, "
                  "1, 11), ('j', 1, 'world.1', '5,0,3', 3, 3, 1, 12)");
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM pragma_table_info('groups') WHERE "
                                  "name = 'ranks'"), 0);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM group_ranks WHERE name = 'world'"), 0);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM group_ranks WHERE name = 'world.1'"), 3);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM group_ranks WHERE name = 'world.1' AND "
                                  "(idx, rank) IN (VALUES (0, 5), (1, 0), (2, 3))"), 3);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM groups WHERE ranks_hash IS NULL"), 2);

    c10ds_groups g;
    ck_assert_int_eq(c10ds_groups_init(&g, &db), 0);
    c10ds_group grp;
    int32_t sub[] = {5, 0, 3};
    ck_assert_int_eq(c10ds_groups_group(&g, "j", 1, "world.1", &grp), 1);
    ck_assert_int_eq(grp.size, 3);
    ck_assert_int_eq(grp.secret, 12);
    ck_assert(grp.ranks_hash == c10ds_ranks_hash(sub, 3));
    int32_t *r = c10ds_groups_ranks(&g, "j", 1, "world.1", 3);
    ck_assert(r && r[0] == 5 && r[1] == 0 && r[2] == 3);
    free(r);
    ck_assert_int_eq(c10ds_groups_group(&g, "j", 1, "world", &grp), 1);
    ck_assert(grp.ranks_hash == c10ds_ranks_hash(NULL, 6)); /* 0..5 */
    r = c10ds_groups_ranks(&g, "j", 1, "world", 6);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(r[i], i);
    free(r);
    /* Made once: written back. */
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM groups WHERE ranks_hash IS NULL"), 0);
    c10ds_groups_fini(&g);
    c10ds_db_close(&db);
}
END_TEST

START_TEST(version_8_final_seqs_text_becomes_rows)
{
    c10ds_db db;
    migrated_from(&db, 8,
                  "INSERT INTO members(job, generation, rank, host, pid, "
                  "client_id, pipe, state, joined_ms, changed_ms, "
                  "last_seen_ms, final_seqs) VALUES "
                  "('j', 1, 0, 'h', 1, 1, 0, 'left', 0, 0, 0, "
                  "',world=349,world.1=20,'), "
                  "('j', 1, 1, 'h', 2, 2, 0, 'dead', 0, 0, 0, NULL), "
                  "('j', 1, 2, 'h', 3, 3, 0, 'left', 0, 0, 0, ''), "
                  "('j', 1, 3, 'h', 4, 4, 0, 'left', 0, 0, 0, "
                  "'x=y=5,g=7')");
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM pragma_table_info('members') WHERE "
                                  "name = 'final_seqs'"), 0);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM member_finals"), 4);
    /* no commas at its ends, a name holding '=': split at the last one */
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM member_finals WHERE rank = 3 AND "
                                  "(grp, seq) IN (VALUES ('x=y', 5), ('g', 7))"), 2);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM member_finals WHERE rank = 0 AND "
                                  "(grp, seq) IN (VALUES ('world', 349), ('world.1', 20))"), 2);

    /* and read back as GroupSeq messages of the member that left */
    c10ds_groups g;
    ck_assert_int_eq(c10ds_groups_init(&g, &db), 0);
    size_t n = 0;
    C10dpb__MemberInfo **v = c10ds_members_load(&g, "j", 1, 1, &n);
    ck_assert_uint_eq(n, 4);
    ck_assert_int_eq(v[0]->rank, 0);
    ck_assert_uint_eq(v[0]->n_finals, 2);
    ck_assert_str_eq(v[0]->finals[0]->group, "world");
    ck_assert_uint_eq(v[0]->finals[0]->seq, 349);
    ck_assert_str_eq(v[0]->finals[1]->group, "world.1");
    ck_assert_uint_eq(v[0]->finals[1]->seq, 20);
    ck_assert_uint_eq(v[1]->n_finals, 0); /* died: stopped wherever it was */
    ck_assert_uint_eq(v[2]->n_finals, 0);
    c10ds_groups_lost_free(v, n);
    c10ds_groups_fini(&g);
    c10ds_db_close(&db);
}
END_TEST

/* Schema 10: runs. Each generation an older coordinator left gets its
 * row: running while one of its members is alive, else over since its
 * last member went; the store keys of the runs already over go (only
 * theirs: the prefix is c10d_run_scope's, with the name escaped). */
START_TEST(version_9_generations_get_their_runs)
{
    c10ds_db db;
    migrated_from(&db, 9,
                  "INSERT INTO jobs(job, generation, world_size, formed, "
                  "version, created_ms) VALUES ('j', 2, 2, 1, 9, 100), "
                  "('a/b%', 1, 1, 1, 1, 50), ('empty', 1, 2, 0, 0, 70); "
                  "INSERT INTO members(job, generation, rank, host, pid, "
                  "client_id, pipe, state, joined_ms, changed_ms, "
                  "last_seen_ms) VALUES "
                  "('j', 1, 0, 'h', 1, 1, 0, 'left', 10, 20, 20), "
                  "('j', 1, 1, 'h', 2, 2, 0, 'dead', 11, 25, 25), "
                  "('j', 2, 0, 'h', 3, 3, 0, 'alive', 30, 30, 30), "
                  "('j', 2, 1, 'h', 4, 4, 0, 'left', 31, 40, 40), "
                  "('a/b%', 1, 0, 'h', 5, 5, 0, 'left', 50, 60, 60); "
                  "INSERT INTO kv(key, value, updated_ms) VALUES "
                  "('jobs/j/1/x', x'00', 1), ('jobs/j/1/y/z', x'00', 1), "
                  "('jobs/j/2/x', x'00', 1), ('jobs/j/10/x', x'00', 1), "
                  "('jobs/j/1', x'00', 1), ('root', x'00', 1), "
                  "('jobs/a%2Fb%25/1/k', x'00', 1), ('jobs/a/b%/1/k', x'00', 1)");
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM runs"), 4);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM runs WHERE (job, generation, started_ms, "
                                  "ended_ms) IN (VALUES ('j', 1, 10, 25), ('a/b%', 1, 50, 60), "
                                  "('empty', 1, 70, 70))"), 3);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM runs WHERE job = 'j' AND generation = 2 "
                                  "AND started_ms = 30 AND ended_ms IS NULL"), 1);
    /* the runs over lost their keys; the running one, other prefixes and
     * the root kept theirs */
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM kv"), 5);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM kv WHERE key IN ('jobs/j/2/x', "
                                  "'jobs/j/10/x', 'jobs/j/1', 'root', 'jobs/a/b%/1/k')"), 5);
    /* and what the coordinator asks of them is answered by their indexes */
    c10ds_groups g;
    ck_assert_int_eq(c10ds_groups_init(&g, &db), 0);
    ck_assert_int_eq(c10ds_groups_alive(&g, "j", 2, NULL, 0), 1);
    ck_assert_int_eq(c10ds_groups_alive(&g, "j", 1, NULL, 0), 0);
    c10ds_groups_fini(&g);
    c10ds_db_close(&db);
}
END_TEST

/* Schema 11: the runs already over have their keys gone (a schema-10
 * coordinator deleted them when each ended); and the per-run keys the
 * library kept outside the run's store before schema 10 go for the runs
 * over, but not where a running run's old prefix holds them too (the
 * name is not escaped there: job "a" generation 1 and job "a/1"). */
START_TEST(version_10_old_layout_keys_of_runs_over_go)
{
    c10ds_db db;
    migrated_from(&db, 10,
                  "INSERT INTO runs(job, generation, started_ms, ended_ms) "
                  "VALUES ('j', 1, 10, 20), ('j', 2, 30, NULL), "
                  "('a', 1, 10, 25), ('a/1', 3, 40, NULL); "
                  "INSERT INTO kv(key, value, updated_ms) VALUES "
                  "('c10d/nccl/j/1/world/id', x'00', 1), "
                  "('c10d/nccl/j/1/world.1/id', x'00', 1), "
                  "('c10d/monitored_barrier/j/1/world/1/arrived/0', x'00', 1), "
                  "('c10d/nccl/a/1/world/id', x'00', 1), "
                  "('c10d/nccl/j/2/world/id', x'00', 1), "
                  "('c10d/nccl/j/10/world/id', x'00', 1), "
                  "('c10d/nccl/a/1/3/world/id', x'00', 1), "
                  "('c10d/monitored_barrier/a/1/3/world/1/x', x'00', 1), "
                  "('c10d/nccl/j/1', x'00', 1), "
                  "('c10d/host/j/1/x', x'00', 1), "
                  "('jobs/j/2/x', x'00', 1), ('root', x'00', 1)");
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM runs WHERE keys_ms = ended_ms"), 2);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM runs WHERE keys_ms IS NULL AND ended_ms "
                                  "IS NULL"), 2);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM kv WHERE key IN ("
                                  "'c10d/nccl/j/1/world/id', 'c10d/nccl/j/1/world.1/id', "
                                  "'c10d/monitored_barrier/j/1/world/1/arrived/0', "
                                  "'c10d/nccl/a/1/world/id')"), 0);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM kv"), 8);
    c10ds_db_close(&db);
}
END_TEST

/* Schema 13: kv leaves WITHOUT ROWID, so that a value is not inside its
 * key's index. Every key and value comes through byte for
 * byte: empty, binary with NULs, over a page (overflow pages), with its
 * updated_ms. */
START_TEST(version_12_store_keeps_every_key_and_value)
{
    enum { BIG = 40 * 256 }; /* every byte value, over two 4 KiB pages */
    static uint8_t big[BIG];
    char *hex = malloc(2 * BIG + 1);
    for (int i = 0; i < BIG; i++) {
        big[i] = (uint8_t)i;
        snprintf(hex + 2 * i, 3, "%02x", big[i]);
    }
    char *rows = sqlite3_mprintf("INSERT INTO kv(key, value, updated_ms) VALUES "
                                 "('empty', x'', 11), ('nul', x'610062', 12), "
                                 "('jobs/j/1/big', x'%s', 13), ('z\xc3\xa9', x'ff', 14)",
                                 hex);
    c10ds_db db;
    migrated_from(&db, 12, rows);
    sqlite3_free(rows);
    free(hex);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM kv"), 4);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM sqlite_master WHERE name = 'kv' AND "
                                  "sql LIKE '%WITHOUT ROWID%'"), 0);
    static const struct {
        const char *key;
        const void *value;
        int len, updated_ms;
    } want[] = {{"empty", "", 0, 11}, {"nul", "a\0b", 3, 12}, {"jobs/j/1/big", big, BIG, 13},
                {"z\xc3\xa9", "\xff", 1, 14}};
    c10ds_store st;
    ck_assert_int_eq(c10ds_store_init(&st, &db), 0);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 4);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const void *v;
        size_t n;
        ck_assert_int_eq(c10ds_store_get(&st, want[i].key, &v, &n), 1);
        ck_assert_uint_eq(n, (size_t)want[i].len);
        if (n)
            ck_assert_int_eq(memcmp(v, want[i].value, n), 0);
        c10ds_store_release(&st);
        char *q = sqlite3_mprintf("SELECT updated_ms FROM kv WHERE key = %Q", want[i].key);
        ck_assert_int_eq(scalar(db.h, q), want[i].updated_ms);
        sqlite3_free(q);
    }
    /* and it is a store like a new one: written, listed in key order */
    ck_assert_int_eq(c10ds_store_set(&st, "new", "v", 1), C10D_OK);
    ck_assert_int_eq(c10ds_store_count(&st, "jobs/"), 1);
    ck_assert_int_eq(c10ds_store_count(&st, NULL), 5);
    c10ds_store_fini(&st);
    c10ds_db_close(&db);
}
END_TEST

/* Schema 14: a rendezvous arrival's columns are renamed from "joined"
 * (members.joined_ms, groups.joined) with every row kept; members.state
 * stays the words schema 3 stored, read as MemberState at the database
 * edge (server/groups/groups.c), and its CHECK still refuses any other. */
START_TEST(version_13_arrivals_renamed_states_read_as_enum)
{
    c10ds_db db;
    migrated_from(&db, 13,
                  "INSERT INTO jobs(job, generation, world_size, formed, version, created_ms) "
                  "VALUES ('j', 1, 3, 1, 4, 5); "
                  "INSERT INTO members(job, generation, rank, host, pid, client_id, pipe, state, "
                  "reason, joined_ms, changed_ms, last_seen_ms) VALUES "
                  "('j', 1, 0, 'h', 1, 1, 0, 'alive', NULL, 10, 10, 30), "
                  "('j', 1, 1, 'h', 2, 2, 0, 'left', 'called c10d_destroy', 11, 20, 20), "
                  "('j', 1, 2, 'h', 3, 3, 0, 'dead', 'no heartbeat', 12, 25, 25); "
                  "INSERT INTO groups(job, generation, name, size, joined, formed, secret, "
                  "ranks_hash) VALUES ('j', 1, 'world', 3, 3, 1, 7, NULL), "
                  "('j', 1, 'world.1', 2, 1, 0, 8, NULL); "
                  "INSERT INTO group_ranks(job, generation, name, idx, rank) VALUES "
                  "('j', 1, 'world.1', 0, 0), ('j', 1, 'world.1', 1, 2)");
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM pragma_table_info('members') WHERE "
                                  "name IN ('joined_ms', 'arrived_ms')"),
                     1);
    ck_assert_int_eq(scalar(db.h, "SELECT sum(arrived_ms) FROM members"), 33);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM pragma_table_info('groups') WHERE "
                                  "name IN ('joined', 'arrived')"),
                     1);
    ck_assert_int_eq(scalar(db.h, "SELECT arrived FROM groups WHERE name = 'world.1'"), 1);
    /* what `sqlite3` shows is the words; nothing else goes in */
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM members WHERE state IN ('alive', "
                                  "'left', 'dead')"),
                     3);
    ck_assert_int_ne(
        sqlite3_exec(db.h, "UPDATE members SET state = 'gone' WHERE rank = 0", NULL, NULL, NULL),
        SQLITE_OK);

    c10ds_groups g;
    ck_assert_int_eq(c10ds_groups_init(&g, &db), 0);
    c10ds_member m;
    ck_assert_int_eq(c10ds_groups_member(&g, "j", 1, 0, &m), 1);
    ck_assert_int_eq(m.state, C10DPB__MEMBER_STATE__MEMBER_ALIVE);
    ck_assert_int_eq(c10ds_groups_member(&g, "j", 1, 2, &m), 1);
    ck_assert_int_eq(m.state, C10DPB__MEMBER_STATE__MEMBER_DEAD);
    size_t n;
    C10dpb__MemberInfo **lost = c10ds_members_load(&g, "j", 1, 1, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert(lost[0]->has_state && lost[0]->state == C10DPB__MEMBER_STATE__MEMBER_LEFT);
    ck_assert(lost[1]->has_state && lost[1]->state == C10DPB__MEMBER_STATE__MEMBER_DEAD);
    c10ds_groups_lost_free(lost, n);
    c10ds_group grp;
    ck_assert_int_eq(c10ds_groups_group(&g, "j", 1, "world.1", &grp), 1);
    ck_assert_int_eq(grp.arrived, 1);
    ck_assert_int_eq(grp.formed, 0);
    /* an arrival counts on the renamed column, and a state change writes the word */
    ck_assert_int_eq(c10ds_groups_arrive(&g, "j", 1, "world.1", 1, 2, "e", 1), 1);
    ck_assert_int_eq(c10ds_groups_group(&g, "j", 1, "world.1", &grp), 1);
    ck_assert_int_eq(grp.arrived, 2);
    ck_assert_int_eq(grp.formed, 1);
    ck_assert_int_eq(c10ds_groups_set_state(&g, "j", 1, 0, C10DPB__MEMBER_STATE__MEMBER_LEFT,
                                            "called c10d_destroy", NULL, 0),
                     1);
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM members WHERE rank = 0 AND state = "
                                  "'left'"),
                     1);
    c10ds_groups_fini(&g);
    c10ds_db_close(&db);
}
END_TEST

START_TEST(newer_database_is_refused)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open(path, &h), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(h);
    c10ds_db db;
    ck_assert_int_eq(c10ds_db_open(&db, path), -1);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "schema version 99 is newer"));
}
END_TEST

/* The operator named a database whose directory is missing (or not
 * theirs): said so, not "cannot open lock file". */
START_TEST(a_missing_directory_is_named_as_such)
{
    c10ds_db db;
    ck_assert_int_eq(c10ds_db_open(&db, "/nonexistent-c10d-dir/coord.db"), -1);
    ck_assert_msg(strstr(c10ds_failure(), "its directory /nonexistent-c10d-dir does not exist"),
                  "%s", c10ds_failure());
    if (geteuid() == 0)
        return; /* root writes anywhere */
    char ro[] = "/tmp/c10d-ro-XXXXXX", file[64];
    ck_assert_ptr_nonnull(mkdtemp(ro));
    chmod(ro, 0555);
    snprintf(file, sizeof file, "%s/coord.db", ro);
    ck_assert_int_eq(c10ds_db_open(&db, file), -1);
    ck_assert_msg(strstr(c10ds_failure(), "is not writable by this user"), "%s", c10ds_failure());
    rmdir(ro);
}
END_TEST

START_TEST(second_open_is_refused_naming_the_holder)
{
    c10ds_db a, b;
    ck_assert_int_eq(c10ds_db_open(&a, path), 0);
    /* flock locks belong to the open file description, so a second open in
     * this process conflicts just as another process would. */
    ck_assert_int_eq(c10ds_db_open(&b, path), -1);
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), "in use by another c10d-coord"));
    char pid[32];
    snprintf(pid, sizeof pid, "pid %d", (int)getpid());
    ck_assert_ptr_nonnull(strstr(c10ds_failure(), pid));
    c10ds_db_close(&a);
    ck_assert_int_eq(c10ds_db_open(&b, path), 0); /* free again */
    c10ds_db_close(&b);
}
END_TEST

/* A commit that fails says SQLite's reason, as it was before the
 * rollback that follows (which leaves its own, "not an error", in
 * sqlite3_errmsg): that reason is what every request of the batch is
 * told (engine.c). */
START_TEST(a_failed_commit_keeps_sqlites_reason_past_its_rollback)
{
    c10ds_db db;
    ck_assert_int_eq(c10ds_db_open(&db, ":memory:"), 0);
    ck_assert_int_eq(sqlite3_exec(db.h, "CREATE TABLE parent (id INTEGER PRIMARY KEY); "
                                        "CREATE TABLE child (p INTEGER REFERENCES parent(id) "
                                        "DEFERRABLE INITIALLY DEFERRED)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(c10ds_db_begin(&db), 0);
    /* checked at COMMIT only (deferred): the statement itself succeeds */
    ck_assert_int_eq(sqlite3_exec(db.h, "INSERT INTO child VALUES (7)", NULL, NULL, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(c10ds_db_commit(&db), -1);
    ck_assert_str_eq(c10ds_failure(), "FOREIGN KEY constraint failed");
    ck_assert_int_eq(sqlite3_get_autocommit(db.h), 1); /* rolled back */
    ck_assert_int_eq(scalar(db.h, "SELECT count(*) FROM child"), 0);
    c10ds_db_close(&db);
}
END_TEST

START_TEST(memory_database_needs_no_lock)
{
    c10ds_db a, b;
    ck_assert_int_eq(c10ds_db_open(&a, ":memory:"), 0);
    ck_assert_int_eq(c10ds_db_open(&b, ":memory:"), 0);
    c10ds_db_close(&a);
    c10ds_db_close(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("db");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, migrations_are_numbered_without_gaps);
    tcase_add_test(tc, fresh_database_gets_newest_schema_in_wal);
    tcase_add_test(tc, version_1_database_is_migrated_with_its_data);
    tcase_add_test(tc, version_7_groups_ranks_text_becomes_rows);
    tcase_add_test(tc, version_8_final_seqs_text_becomes_rows);
    tcase_add_test(tc, version_9_generations_get_their_runs);
    tcase_add_test(tc, version_10_old_layout_keys_of_runs_over_go);
    tcase_add_test(tc, version_12_store_keeps_every_key_and_value);
    tcase_add_test(tc, version_13_arrivals_renamed_states_read_as_enum);
    tcase_add_test(tc, newer_database_is_refused);
    tcase_add_test(tc, second_open_is_refused_naming_the_holder);
    tcase_add_test(tc, memory_database_needs_no_lock);
    tcase_add_test(tc, a_missing_directory_is_named_as_such);
    tcase_add_test(tc, a_failed_commit_keeps_sqlites_reason_past_its_rollback);
    suite_add_tcase(s, tc);
    return c10d_run_suite(s);
}
