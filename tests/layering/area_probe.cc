// Compiled by tests/cmake/layering.cmake as if it were a file of one area
// (the build's own flags for that area). KILN_PROBE_HEADER names the header
// to include: one of the area itself or of an area it uses must compile (so
// the probe and the area's flags are sound), one of an area above it must
// be "file not found".
#include KILN_PROBE_HEADER

int kiln_layering_probe_compiled = 1;
