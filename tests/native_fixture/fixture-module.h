// Umbrella header of the test fixture module (built and loaded by tests/ns3/test_native_build.py).
#ifndef HETERO_NS3_FIXTURE_MODULE_H
#define HETERO_NS3_FIXTURE_MODULE_H
#include "tick-counter.h"
#endif
