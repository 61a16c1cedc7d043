#ifndef HETERO_NS3_ROCE_POOL_H
#define HETERO_NS3_ROCE_POOL_H

#include <cstddef>
#include <new>

namespace ns3
{

/**
 * \brief Free list of fixed-size memory blocks for objects made and destroyed once per frame or
 * per event (RocePacket, the module's own EventImpl subclasses).
 *
 * A class T uses it by defining operator new / delete that call Allocate / Release with
 * sizeof(T); other sizes (a derived class) fall through to the global allocator. The simulator
 * runs on one thread, so there is no locking. Blocks are never returned to the system: the list
 * holds at most the peak number of objects alive at once.
 */
template<std::size_t Size>
class RoceFreeList
{
public:
    /** \return memory for \p bytes (a block from the list when \p bytes == Size). */
    static void*
    Allocate(std::size_t bytes)
    {
        if (bytes == Size && s_head != nullptr)
        {
            Node* n = s_head;
            s_head = n->next;
            return n;
        }
        return ::operator new(bytes < sizeof(Node) ? sizeof(Node) : bytes);
    }

    /** Give back \p ptr, allocated by Allocate(\p bytes). */
    static void
    Release(void* ptr, std::size_t bytes)
    {
        if (ptr == nullptr)
        {
            return;
        }
        if (bytes != Size)
        {
            ::operator delete(ptr);
            return;
        }
        auto* n = static_cast<Node*>(ptr);
        n->next = s_head;
        s_head = n;
    }

private:
    /** A free block, linked into the list. */
    struct Node
    {
        Node* next;
    };

    static inline Node* s_head = nullptr; //!< first free block
};

} // namespace ns3

#endif
