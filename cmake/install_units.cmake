# Installs deploy/'s systemd units into share/c10d-coord/deploy/ with
# ExecStart= naming the c10d-coord that is installed with them. Run at
# install time (install(CODE) in CMakeLists.txt), not at configure time:
# `cmake --install --prefix P` chooses the prefix only then. The repo's
# copies name /usr/local/bin (the default prefix), so they stay usable as
# they are; this swaps that for the prefix's bin/.
#   C10D_UNIT_SRC   the deploy/ folder
#   C10D_UNIT_BIN   bin/, relative to the prefix (CMAKE_INSTALL_BINDIR) or absolute
#   C10D_UNIT_DEST  where they go, relative to the prefix
#   C10D_UNITS      the unit files' names
if(IS_ABSOLUTE "${C10D_UNIT_BIN}")
  set(bindir "${C10D_UNIT_BIN}")
else()
  set(bindir "${CMAKE_INSTALL_PREFIX}/${C10D_UNIT_BIN}")
endif()
set(dest "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${C10D_UNIT_DEST}")
file(MAKE_DIRECTORY "${dest}")
foreach(unit ${C10D_UNITS})
  file(READ "${C10D_UNIT_SRC}/${unit}" text)
  string(REPLACE "ExecStart=/usr/local/bin/" "ExecStart=${bindir}/" text "${text}")
  message(STATUS "Installing: ${dest}/${unit}")
  file(WRITE "${dest}/${unit}" "${text}")
endforeach()
