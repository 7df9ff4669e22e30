// Every unit test binary runs the test accelerators through the plugin
// boundary: unless KILN_BACKEND_PATH says otherwise, kiln loads their
// plugin from this build tree (before main, so before the first backend
// lookup).
#include <cstdlib>

namespace {

const bool kPluginPathSet = [] { return ::setenv("KILN_BACKEND_PATH", KILN_BINARY_DIR "/plugins", 0) == 0; }();

}  // namespace
