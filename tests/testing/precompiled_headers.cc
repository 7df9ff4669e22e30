// An empty program: it exists for the precompiled header the test binaries
// share (tests/CMakeLists.txt), compiled as they are.
int main() { return 0; }
