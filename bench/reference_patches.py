"""Local fixes to the reference RDMA model (aliyun/ns-3-alibabacloud@c2bfbf4) before it is built by
``bench/reference_incast.sh``; idempotent. Each one repairs a bug of SimAI's copy that the HPCC artifact
(alibaba-edu/High-Precision-Congestion-Control) does not have, so the built code behaves as the artifact's:

1. ``RdmaHw::SendPacketComplete`` is declared ``int`` and falls off its end (undefined behaviour; it aborts
   at -O3 with gcc 12): return 0.
2. ``SwitchNode::SwitchNotifyDequeue`` writes HPCC's INT hop record at ppp + IP + UDP + 6 bytes, the
   artifact's SeqTs header (32-bit sequence number + class). SimAI widened the sequence number to 64 bits
   (its ``CustomHeader`` reads 8 + 2 bytes) but kept the offset, so every hop record overwrote the sequence
   number and the class of a DATA frame (class 64 -> out-of-range queue -> crash): offset 10.
3. ``QbbNetDevice::Resume`` (SimAI's NVLS change) reads ``m_rdmaEQ->GetQp(qIndex)``, a queue pair indexed
   by the traffic class, on every RESUME, then only uses it on an NVSwitch node: on a host with fewer
   queue pairs than the class index it reads past the vector (crash). The lookup now happens only on an
   NVSwitch node (node type 2), as the artifact's Resume, which just calls DequeueAndTransmit elsewhere.

Usage: ``python3 bench/reference_patches.py <simulation/src/point-to-point/model>``
"""

from __future__ import annotations

import sys
from pathlib import Path

PATCHES = (
    (
        "rdma-hw.cc",
        "\tPtr<QbbNetDevice> dev = m_nic[nic_idx].dev;\n\tSendComplete(qp);\n}",
        "\tPtr<QbbNetDevice> dev = m_nic[nic_idx].dev;\n\tSendComplete(qp);\n"
        "\treturn 0; // hetero_ns3: fell off its end (UB)\n}",
    ),
    (
        "switch-node.cc",
        "(IntHeader*)&buf[PppHeader::GetStaticSize() + 20 + 8 + 6]; // ppp, ip, udp, SeqTs, INT",
        "(IntHeader*)&buf[PppHeader::GetStaticSize() + 20 + 8 + 10]; // hetero_ns3: SeqTs is 8 + 2 bytes",
    ),
    (
        "qbb-net-device.cc",
        "\t\tPtr<RdmaQueuePair> lastQp = m_rdmaEQ->GetQp(qIndex);\n"
        "\t\tif(lastQp->nvls_enable == 1 && m_node->GetNodeType() == 2) SwitchAsHostSend(); ",
        "\t\t// hetero_ns3: the queue pair is looked up (by class index) only on an NVSwitch node\n"
        "\t\tif(m_node->GetNodeType() == 2 && m_rdmaEQ->GetQp(qIndex)->nvls_enable == 1) SwitchAsHostSend(); ",
    ),
)


def main(argv: list[str]) -> int:
    model = Path(argv[0])
    for name, old, new in PATCHES:
        path = model / name
        text = path.read_text()
        if text.count(new) == 1 or (name == "rdma-hw.cc" and "\tSendComplete(qp);\n\treturn 0;" in text):
            continue  # done (the first fix also as the earlier script wrote it)
        if text.count(old) != 1:
            raise SystemExit(f"{path}: the code to patch was not found as expected")
        path.write_text(text.replace(old, new))
        print(f"patched {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
