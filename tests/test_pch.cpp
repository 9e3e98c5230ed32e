// defines: nothing. The translation unit that builds the tests' precompiled header (tests/CMakeLists.txt,
// LMFORGE_TEST_PCH): the headers are its precompiled prefix; this file has nothing of its own.
