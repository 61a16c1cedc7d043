#include "roce-packet.h"

#include <new>

namespace ns3
{

namespace
{

/** A freed frame's memory, linked into the free list. */
struct FreeFrame
{
    FreeFrame* next;
};

/**
 * Free list of frame-sized blocks. The simulator runs on one thread, so no locking. Blocks are
 * never returned to the system: the list holds at most the peak number of frames alive at once
 * (frames queued in ports or on the wire), a few hundred bytes each.
 */
FreeFrame* g_freeFrames = nullptr;

} // namespace

void*
RocePacket::operator new(std::size_t bytes)
{
    if (bytes == sizeof(RocePacket) && g_freeFrames != nullptr)
    {
        FreeFrame* f = g_freeFrames;
        g_freeFrames = f->next;
        return f;
    }
    return ::operator new(bytes < sizeof(FreeFrame) ? sizeof(FreeFrame) : bytes);
}

void
RocePacket::operator delete(void* ptr, std::size_t bytes)
{
    if (ptr == nullptr)
    {
        return;
    }
    if (bytes != sizeof(RocePacket))
    {
        ::operator delete(ptr);
        return;
    }
    auto* f = static_cast<FreeFrame*>(ptr);
    f->next = g_freeFrames;
    g_freeFrames = f;
}

} // namespace ns3
