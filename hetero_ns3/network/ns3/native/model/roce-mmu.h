#ifndef HETERO_NS3_ROCE_MMU_H
#define HETERO_NS3_ROCE_MMU_H

#include "ns3/object.h"

#include <array>
#include <cstdint>
#include <vector>

namespace ns3
{

/**
 * \brief Shared-buffer memory management unit of a RoCE switch.
 *
 * The buffer (BufferBytes) is split into a per-port PFC headroom reserve and a shared
 * pool. Every admitted frame is charged to its ingress (port, class) and egress
 * (port, class). Lossless classes (PFC on and class in LosslessClasses) are admitted into
 * the shared pool while the ingress (port, class) is below the PFC threshold and the pool
 * has room; beyond that they go into the ingress port's headroom and the switch sends
 * PAUSE upstream. A lossless frame is dropped only when headroom is exhausted
 * (misconfiguration). Lossy classes are dropped when the egress (port, class) exceeds the
 * egress threshold or the shared pool is full. Thresholds are static, or dynamic
 * (alpha x free shared bytes, Choudhury and Hahne's dynamic threshold).
 */
class RoceMmu : public Object
{
public:
    static constexpr uint32_t N_CLASSES = 8; //!< traffic classes

    /** Outcome of an admission check. */
    enum Admission
    {
        ADMIT_SHARED = 0,   //!< admitted in the shared pool
        ADMIT_HEADROOM = 1, //!< admitted in PFC headroom (lossless)
        DROP_LOSSY = 2,     //!< lossy class over threshold
        DROP_HEADROOM = 3,  //!< lossless class, headroom exhausted
    };

    /** \return the TypeId. */
    static TypeId GetTypeId();
    RoceMmu();

    /**
     * Size the MMU for \p nPorts ports; \p headroom[i] is the headroom reserve of port i
     * (bytes) used when HeadroomBytes is 0. Aborts when headroom exceeds the buffer.
     */
    void Setup(uint32_t nPorts, const std::vector<uint64_t>& headroom);
    /** Override the buffer size (bytes; 0 keeps the attribute). Call before Setup. */
    void SetBufferBytes(uint64_t bytes);
    /** \return true when class \p cls is lossless. */
    bool IsLossless(uint8_t cls) const;
    /** Admission check for a frame of \p size bytes; charges the counters when admitted. */
    Admission Admit(uint32_t inPort, uint32_t outPort, uint8_t cls, uint32_t size);
    /**
     * Release an admitted frame of \p size bytes: from the headroom count of its ingress
     * (port, class) first, the rest from the shared pool, whichever region the frame went to.
     */
    void Release(uint32_t inPort, uint32_t outPort, uint8_t cls, uint32_t size);
    /** \return true when (inPort, cls) is over its PFC threshold (send PAUSE). */
    bool ShouldPause(uint32_t inPort, uint8_t cls) const;
    /** \return true when (inPort, cls) has drained enough to RESUME. */
    bool ShouldResume(uint32_t inPort, uint8_t cls) const;
    /** \return the current PFC threshold of ingress (port, class), bytes. */
    uint64_t PfcThreshold() const;
    /** \return bytes in use in the shared pool. */
    uint64_t GetSharedUsed() const;
    /** \return size of the shared pool, bytes. */
    uint64_t GetSharedPool() const;
    /** \return bytes charged to ingress (port, class) in the shared pool. */
    uint64_t GetIngressBytes(uint32_t port, uint8_t cls) const;
    /** \return PFC pause quanta to send. */
    uint16_t GetPauseQuanta() const;

private:
    uint64_t EgressThreshold() const;

    uint64_t m_bufferBytes;
    bool m_pfcEnabled;
    uint32_t m_losslessMask;
    bool m_pfcDynamic;
    double m_pfcAlpha;
    uint64_t m_pfcStatic;
    uint64_t m_resumeOffset;
    uint64_t m_headroomAttr;
    bool m_egressDynamic;
    double m_egressAlpha;
    uint64_t m_egressStatic;
    uint16_t m_pauseQuanta;

    uint64_t m_sharedPool{0};
    uint64_t m_sharedUsed{0};
    std::vector<uint64_t> m_headroom;
    std::vector<uint64_t> m_headroomUsed;
    std::vector<std::array<uint64_t, N_CLASSES>> m_ingress;
    std::vector<std::array<uint64_t, N_CLASSES>> m_ingressHdrm;
    std::vector<std::array<uint64_t, N_CLASSES>> m_egress;
};

} // namespace ns3

#endif
