// tests/cpp/test_main.cpp: the doctest runner of lp_core's unit tests.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
