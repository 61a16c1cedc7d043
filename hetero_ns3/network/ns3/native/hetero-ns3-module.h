// Umbrella header of hetero_ns3's native RoCE module (PFC, ECN, INT, DCQCN, HPCC, DCTCP, TIMELY).
#ifndef HETERO_NS3_MODULE_H
#define HETERO_NS3_MODULE_H
#include "queue-sampler.h"
#include "rdma-cc-probe.h"
#include "rdma-congestion-ops.h"
#include "rdma-dcqcn.h"
#include "rdma-dctcp.h"
#include "rdma-flow-table.h"
#include "rdma-hpcc.h"
#include "rdma-network.h"
#include "rdma-nic.h"
#include "rdma-queue-pair.h"
#include "rdma-timely.h"
#include "roce-channel.h"
#include "roce-mmu.h"
#include "roce-net-device.h"
#include "roce-node.h"
#include "roce-packet.h"
#include "roce-profile.h"
#include "roce-scheduler.h"
#include "roce-switch.h"
#endif
