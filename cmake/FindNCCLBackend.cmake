# Detects CUDA and NCCL for the GPU data plane. They are optional: without
# them everything builds with the host backend only, and configure says so.
# Looks in NCCL_HOME, CUDA_HOME, /usr/local/cuda (headers and libraries).
# Sets C10D_HAVE_NCCL, C10D_NCCL_INCLUDE_DIR, C10D_NCCL_LIBRARY,
# C10D_CUDA_INCLUDE_DIR, C10D_NCCL_VERSION, C10D_NCCL_LIBDIR, C10D_CUDART_LIBDIR.
set(_hints)
foreach(v NCCL_HOME CUDA_HOME)
  if(DEFINED ENV{${v}})
    list(APPEND _hints "$ENV{${v}}")
  endif()
endforeach()
list(APPEND _hints /usr/local/cuda /usr)

find_path(C10D_NCCL_INCLUDE_DIR nccl.h HINTS ${_hints} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(C10D_NCCL_LIBRARY NAMES nccl HINTS ${_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu NO_DEFAULT_PATH)
find_path(C10D_CUDA_INCLUDE_DIR cuda_runtime_api.h HINTS ${_hints} PATH_SUFFIXES include targets/x86_64-linux/include NO_DEFAULT_PATH)
find_library(C10D_CUDART_LIBRARY NAMES cudart HINTS ${_hints} PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu targets/x86_64-linux/lib NO_DEFAULT_PATH)
# The libraries are not linked: libc10dclient dlopens them at run time
# (client/src/nccl/gpu_api.c), falling back to these directories.
if(C10D_NCCL_LIBRARY)
  get_filename_component(C10D_NCCL_LIBDIR "${C10D_NCCL_LIBRARY}" DIRECTORY)
endif()
if(C10D_CUDART_LIBRARY)
  get_filename_component(C10D_CUDART_LIBDIR "${C10D_CUDART_LIBRARY}" DIRECTORY)
else()
  set(C10D_CUDART_LIBDIR "${C10D_NCCL_LIBDIR}")
endif()

set(C10D_HAVE_NCCL OFF)
set(C10D_NCCL_WHY "")
if(NOT C10D_NCCL_INCLUDE_DIR)
  set(C10D_NCCL_WHY "nccl.h not found (set NCCL_HOME or CUDA_HOME)")
elseif(NOT C10D_NCCL_LIBRARY)
  set(C10D_NCCL_WHY "libnccl not found (set NCCL_HOME)")
elseif(NOT C10D_CUDA_INCLUDE_DIR)
  set(C10D_NCCL_WHY "CUDA headers not found (set CUDA_HOME)")
else()
  set(C10D_HAVE_NCCL ON)
  file(STRINGS "${C10D_NCCL_INCLUDE_DIR}/nccl.h" _v REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*" "\\1" _maj "${_v}")
  string(REGEX REPLACE ".*NCCL_MINOR ([0-9]+).*" "\\1" _min "${_v}")
  string(REGEX REPLACE ".*NCCL_PATCH ([0-9]+).*" "\\1" _pat "${_v}")
  set(C10D_NCCL_VERSION "${_maj}.${_min}.${_pat}")
endif()
