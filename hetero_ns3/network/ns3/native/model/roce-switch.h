#ifndef HETERO_NS3_ROCE_SWITCH_H
#define HETERO_NS3_ROCE_SWITCH_H

#include "ns3/data-rate.h"
#include "ns3/event-id.h"
#include "ns3/random-variable-stream.h"
#include "ns3/traced-callback.h"
#include "roce-mmu.h"
#include "roce-node.h"

#include <array>
#include <vector>

namespace ns3
{

/**
 * \brief Switch forwarding logic: destination-based ECMP, shared-buffer MMU with PFC,
 * RED-like ECN marking at egress and INT stamping for HPCC.
 *
 * ECN: when a DATA frame leaves egress port p (class c), with q bytes still queued in
 * (p, c), it is marked with probability 0 below Kmin, Pmax x (q - Kmin)/(Kmax - Kmin)
 * between Kmin and Kmax, and 1 above Kmax. Kmin/Kmax are given for EcnReferenceRate and,
 * with EcnScaleWithRate, scaled linearly with the port's rate.
 *
 * INT: with IntEnabled, each DATA frame gets one IntHop per switch egress: port queue
 * bytes, cumulative tx bytes, timestamp and link rate.
 */
class RoceSwitch : public RoceNode
{
public:
    /** \return the TypeId. */
    static TypeId GetTypeId();
    /** Signature of the EcnMark trace: (egress port index, flow id). */
    typedef void (*EcnMarkTracedCallback)(uint32_t port, uint32_t flowId);
    RoceSwitch();
    ~RoceSwitch() override;

    /** Size the MMU after all ports exist; \p bufferBytes 0 keeps RoceMmu's default. */
    void Setup(uint64_t bufferBytes);
    /** \return the MMU. */
    Ptr<RoceMmu> GetMmu() const;
    /** \return ECN marking probability for \p qlenBytes queued at port \p port. */
    double MarkProbability(uint32_t port, uint64_t qlenBytes) const;
    /** Draw the ECN decision for \p qlenBytes at \p port (uses this switch's RNG stream). */
    bool ShouldMark(uint32_t port, uint64_t qlenBytes);

    void Receive(Ptr<RocePacket> p, uint32_t port) override;
    void NotifyDequeue(uint32_t port, RocePacket& p) override;
    bool IsHost() const override;

protected:
    void DoDispose() override;

private:
    void SendPause(uint32_t port, uint8_t cls);
    void RefreshPause(uint32_t port, uint8_t cls);

    Ptr<RoceMmu> m_mmu;
    Ptr<UniformRandomVariable> m_rng;
    bool m_ecnEnabled;
    uint64_t m_kmin;
    uint64_t m_kmax;
    double m_pmax;
    DataRate m_ecnRefRate;
    bool m_ecnScale;
    bool m_intEnabled;
    std::vector<double> m_portKmin;
    std::vector<double> m_portKmax;
    std::vector<std::array<bool, 8>> m_pausing;
    std::vector<std::array<EventId, 8>> m_refresh;
    TracedCallback<uint32_t, uint32_t> m_ecnMarkTrace; //!< (egress port, flow id) of each CE mark
};

} // namespace ns3

#endif
