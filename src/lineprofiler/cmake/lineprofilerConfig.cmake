# lineprofilerConfig.cmake: find_package(lineprofiler CONFIG) for the C++ API of with-line-profiler.
#
#   execute_process(COMMAND "${Python_EXECUTABLE}" -c "import lineprofiler; print(lineprofiler.get_cmake_dir())"
#                   OUTPUT_VARIABLE lineprofiler_DIR OUTPUT_STRIP_TRAILING_WHITESPACE)
#   find_package(lineprofiler CONFIG REQUIRED)
#   target_link_libraries(my_extension PRIVATE lineprofiler::headers)
#
# Targets:
#   lineprofiler::headers     INTERFACE: <lineprofiler/accounting.hpp> and <lineprofiler/python.hpp>
#                             (C++17). A Python extension needs nothing else: it reaches the
#                             installed lineprofiler._core at run time through import_api().
#   lineprofiler::standalone  liblineprofiler.a, for C++ programs without Python (defined by
#                             lineprofilerStandalone.cmake, beside this file, when the package has it).
# Variables: lineprofiler_INCLUDE_DIR.

get_filename_component(_lineprofiler_package_dir "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(lineprofiler_INCLUDE_DIR "${_lineprofiler_package_dir}/include")

if(NOT TARGET lineprofiler::headers)
  add_library(lineprofiler::headers INTERFACE IMPORTED)
  set_target_properties(lineprofiler::headers PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${lineprofiler_INCLUDE_DIR}"
    INTERFACE_COMPILE_FEATURES cxx_std_17)
endif()

# The standalone library's targets (lineprofiler::standalone) live in their own file.
include("${CMAKE_CURRENT_LIST_DIR}/lineprofilerStandalone.cmake" OPTIONAL)

unset(_lineprofiler_package_dir)
set(lineprofiler_FOUND TRUE)
