// RoceNetDevice, egress and PFC: the eight class queues, strict priority / deficit weighted round
// robin, frame transmission with its transmit-complete and pacing wake-up events, and 802.1Qbb
// PAUSE/RESUME (sent ahead of all data; received ones stop and restart a class). The device
// plumbing (attributes, counters, NetDevice interface) is in roce-net-device.cc.
#include "ns3/abort.h"
#include "ns3/event-impl.h"
#include "ns3/log.h"
#include "ns3/simulator.h"
#include "roce-channel.h"
#include "roce-net-device.h"
#include "roce-node.h"
#include "roce-pool.h"
#include "roce-profile.h"

#include <cmath>
#include <sstream>

namespace ns3
{

NS_LOG_COMPONENT_DEFINE("RoceNetDeviceEgress");

/**
 * A port's own timer (transmit complete, pacing wake-up): a pooled EventImpl calling a member
 * without arguments, instead of MakeEvent's two allocations (event and std::function).
 */
class RoceNetDevice::PortEvent : public EventImpl
{
public:
    PortEvent(RoceNetDevice* dev, void (RoceNetDevice::*fn)())
        : m_dev(dev)
        , m_fn(fn)
    {
    }

    static void*
    operator new(std::size_t bytes)
    {
        return RoceFreeList<sizeof(PortEvent)>::Allocate(bytes);
    }

    static void
    operator delete(void* ptr, std::size_t bytes)
    {
        RoceFreeList<sizeof(PortEvent)>::Release(ptr, bytes);
    }

protected:
    void
    Notify() override
    {
        (m_dev->*m_fn)();
    }

private:
    RoceNetDevice* m_dev;
    void (RoceNetDevice::*m_fn)();
};

EventId
RoceNetDevice::SchedulePortEvent(Time delay, void (RoceNetDevice::*fn)())
{
    // Ptr without an extra reference: the simulator's copy then holds the only one.
    return Simulator::Schedule(delay, Ptr<EventImpl>(new PortEvent(this, fn), false));
}

Time
RoceNetDevice::TxTime(uint32_t bytes)
{
    // Exact average rate at nanosecond resolution: carry the fractional nanoseconds.
    double ns = bytes * 8.0 * 1e9 / m_bps + m_txFracNs;
    double whole = std::floor(ns);
    m_txFracNs = ns - whole;
    return NanoSeconds(static_cast<int64_t>(whole));
}

uint8_t
RoceNetDevice::PausedMask() const
{
    uint8_t m = 0;
    for (uint32_t c = 0; c < N_CLASSES; ++c)
    {
        if (m_paused[c])
        {
            m |= uint8_t(1u << c);
        }
    }
    return m;
}

void
RoceNetDevice::ParseWeights()
{
    std::istringstream in(m_weightsText);
    for (uint32_t c = 0; c < N_CLASSES; ++c)
    {
        int64_t w = 0;
        in >> w;
        NS_ABORT_MSG_IF(!in || w <= 0,
                        "RoceNetDevice::WrrWeights must hold 8 positive integers, got '"
                            << m_weightsText << "'");
        m_weights[c] = static_cast<uint32_t>(w);
    }
    m_weightsParsed = true;
}

int
RoceNetDevice::PickClass()
{
    if (m_totalQueueBytes == 0)
    {
        return -1;
    }
    if (m_scheduler == STRICT)
    {
        for (int c = N_CLASSES - 1; c >= 0; --c)
        {
            if (!m_paused[c] && !m_queues[c].empty())
            {
                return c;
            }
        }
        return -1;
    }
    if (!m_weightsParsed)
    {
        ParseWeights();
    }
    // Deficit round robin: quantum 1500 B x weight per visit.
    for (uint32_t iter = 0; iter < 64 * N_CLASSES; ++iter)
    {
        uint32_t c = m_wrrCur;
        if (!m_paused[c] && !m_queues[c].empty())
        {
            if (m_deficit[c] >= static_cast<int64_t>(m_queues[c].front()->size))
            {
                m_deficit[c] -= m_queues[c].front()->size;
                return static_cast<int>(c);
            }
        }
        else
        {
            m_deficit[c] = 0;
        }
        m_wrrCur = (m_wrrCur + 1) % N_CLASSES;
        uint32_t n = m_wrrCur;
        if (!m_paused[n] && !m_queues[n].empty())
        {
            m_deficit[n] += 1500 * static_cast<int64_t>(m_weights[n]);
        }
    }
    for (uint32_t c = 0; c < N_CLASSES; ++c)
    {
        if (!m_paused[c] && !m_queues[c].empty())
        {
            return static_cast<int>(c);
        }
    }
    return -1;
}

void
RoceNetDevice::Enqueue(Ptr<RocePacket> p)
{
    if (!m_linkUp)
    {
        RecordDrop(*p, DROP_LINK_DOWN);
        return;
    }
    uint8_t c = p->priority & 7;
    m_queueBytes[c] += p->size;
    m_totalQueueBytes += p->size;
    m_queues[c].push_back(std::move(p));
    TryTransmit();
}

void
RoceNetDevice::SendPfc(uint8_t cls, uint16_t quanta)
{
    Ptr<RocePacket> p = Create<RocePacket>();
    p->type = RocePacketType::PFC;
    p->pfcClass = cls;
    p->pfcQuanta = quanta;
    p->size = 64;
    p->ecnCapable = false;
    NS_LOG_LOGIC("port " << m_localPort << ": PFC " << (quanta > 0 ? "pause" : "resume")
                         << " sent, class " << static_cast<int>(cls) << ", quanta " << quanta);
    if (quanta > 0)
    {
        ++m_pauseSent;
    }
    else
    {
        ++m_resumeSent;
    }
    m_ctrl.push_back(p);
    TryTransmit();
}

void
RoceNetDevice::TryTransmit()
{
    if (!m_linkUp)
    {
        return;
    }
    Time now = Simulator::Now();
    Time at = now; // when the next frame starts
    if (now < m_busyUntil)
    {
        // A switch port one clock step before the end of its frame, with nothing else waiting: no
        // event can fall strictly in between, so the frame is chosen now and starts at m_busyUntil
        // instead of through a transmit-complete event (only events at this same instant could tell
        // the difference). Where frames come in at the rate they go out, rounding to whole
        // nanoseconds makes most of them arrive one nanosecond early: this saves one event each.
        bool oneStep = (m_busyUntil - now).GetTimeStep() == 1;
        if (!oneStep || m_owner->IsHost() || m_txEvent.IsPending())
        {
            // Serializing a frame: come back when it is done (one event, only when needed).
            if (!m_txEvent.IsPending())
            {
                m_txEvent = SchedulePortEvent(m_busyUntil - now, &RoceNetDevice::TransmitComplete);
            }
            return;
        }
        at = m_busyUntil;
    }
    Ptr<RocePacket> p;
    if (!m_ctrl.empty())
    {
        p = m_ctrl.front();
        m_ctrl.pop_front();
    }
    else
    {
        int c = PickClass();
        if (c >= 0)
        {
            p = m_queues[c].front();
            m_queues[c].pop_front();
            m_queueBytes[c] -= p->size;
            m_totalQueueBytes -= p->size;
        }
        else if (m_owner->IsHost())
        {
            Time wake(0);
            p = m_owner->PullData(m_localPort, PausedMask(), &wake);
            if (!p)
            {
                if (wake.IsStrictlyPositive())
                {
                    ScheduleWake(wake);
                }
                return;
            }
        }
        else
        {
            return;
        }
        m_owner->NotifyDequeue(m_localPort, *p);
    }
    m_txBytes += p->size;
    ++m_txPackets;
    if (p->type == RocePacketType::DATA)
    {
        m_txDataBytes += p->payload;
    }
    m_txBeginTrace(p->flowId, p->size);
    Time tx = TxTime(p->size);
    Time lead = at - now; // zero, or one step when starting ahead (switch ports only)
    m_busyUntil = at + tx;
    if (m_totalQueueBytes > 0 || !m_ctrl.empty())
    {
        m_txEvent = SchedulePortEvent(lead + tx, &RoceNetDevice::TransmitComplete);
    }
    else if (m_owner->IsHost())
    {
        // Come back when the NIC can next send: at the end of this frame, or later when every
        // queue pair is paced past it (one wake-up instead of a transmit-complete that finds
        // nothing ready plus a wake-up), or never until a new flow, ACK, RESUME or timeout calls
        // TryTransmit (a frame enqueued meanwhile schedules the transmit-complete itself).
        Time next = m_owner->NextPullTime(m_localPort, PausedMask());
        if (next <= m_busyUntil)
        {
            m_txEvent = SchedulePortEvent(tx, &RoceNetDevice::TransmitComplete);
        }
        else if (next != Time::Max())
        {
            ScheduleWake(next);
        }
    }
    m_channel->Transmit(p, this, lead + tx);
}

void
RoceNetDevice::TransmitComplete()
{
    RoceProfile::Count(EV_TX_COMPLETE);
    TryTransmit();
}

void
RoceNetDevice::ScheduleWake(Time at)
{
    if (m_wakeEvent.IsPending())
    {
        if (m_wakeAt <= at)
        {
            return;
        }
        m_wakeEvent.Cancel();
    }
    m_wakeAt = at;
    Time delay = at - Simulator::Now();
    if (delay.IsStrictlyNegative())
    {
        delay = Time(0);
    }
    m_wakeEvent = SchedulePortEvent(delay, &RoceNetDevice::Wake);
}

void
RoceNetDevice::Wake()
{
    RoceProfile::Count(EV_PACING_WAKE);
    TryTransmit();
}

void
RoceNetDevice::Receive(Ptr<RocePacket> p)
{
    if (!m_linkUp)
    {
        RecordDrop(*p, DROP_LINK_DOWN);
        return;
    }
    if (p->type == RocePacketType::PFC)
    {
        uint8_t c = p->pfcClass & 7;
        m_pfcRxTrace(c, p->pfcQuanta);
        NS_LOG_LOGIC("port " << m_localPort << ": PFC " << (p->pfcQuanta > 0 ? "pause" : "resume")
                             << " received, class " << static_cast<int>(c) << ", quanta "
                             << p->pfcQuanta);
        if (p->pfcQuanta == 0)
        {
            Resume(c);
            return;
        }
        ++m_pauseRecv;
        if (!m_paused[c])
        {
            m_paused[c] = true;
            m_pauseStart[c] = Simulator::Now();
        }
        m_resumeEvent[c].Cancel();
        // One quantum is 512 bit times at this port's speed (802.1Qbb).
        Time pause =
            NanoSeconds(static_cast<int64_t>(std::ceil(p->pfcQuanta * 512.0 * 1e9 / m_bps)));
        m_resumeEvent[c] = Simulator::Schedule(pause, &RoceNetDevice::PauseExpired, this, c);
        return;
    }
    m_owner->Receive(p, m_localPort);
}

void
RoceNetDevice::PauseExpired(uint8_t cls)
{
    RoceProfile::Count(EV_PFC_RESUME_TIMER);
    Resume(cls);
}

void
RoceNetDevice::Resume(uint8_t cls)
{
    Simulator::Remove(m_resumeEvent[cls]);
    if (!m_paused[cls])
    {
        return;
    }
    m_paused[cls] = false;
    m_pausedTime += Simulator::Now() - m_pauseStart[cls];
    TryTransmit();
}

} // namespace ns3
