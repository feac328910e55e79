# lineprofilerStandalone.cmake: lineprofiler::standalone, liblineprofiler.a for C++ programs without
# Python (included by lineprofilerConfig.cmake beside it).
#
#   target_link_libraries(my_server PRIVATE lineprofiler::standalone)
#
# gives <lineprofiler/standalone.hpp> (lineprofiler::Profiler) and <lineprofiler/accounting.hpp>
# (LP_PHASE, LP_COUNT), C++17, and links the archive with its threads and dl dependencies.
# Variables: lineprofiler_LIBRARY (the archive's path).

get_filename_component(_lineprofiler_standalone_pkg "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(lineprofiler_LIBRARY "${_lineprofiler_standalone_pkg}/lib/liblineprofiler.a")

if(NOT TARGET lineprofiler::standalone AND EXISTS "${lineprofiler_LIBRARY}")
  include(CMakeFindDependencyMacro)
  find_dependency(Threads)
  add_library(lineprofiler::standalone STATIC IMPORTED)
  set_target_properties(lineprofiler::standalone PROPERTIES
    IMPORTED_LOCATION "${lineprofiler_LIBRARY}"
    IMPORTED_LINK_INTERFACE_LANGUAGES CXX
    INTERFACE_INCLUDE_DIRECTORIES "${_lineprofiler_standalone_pkg}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_17
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS}")
endif()

unset(_lineprofiler_standalone_pkg)
