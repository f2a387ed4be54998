package captures

import (
	"sync"
	"time"
)

// smallBlock is the size of the blocks a File takes when records start to
// come after a quiet spell: a sixteenth of a big block. A link that sends a
// few frames a second fills one in minutes, so a thousand such captures
// hold 128 MiB at most, not 2 GiB; a busy link fills them in microseconds
// and goes on with big ones at the next 2-MiB boundary of its file. It is
// larger than the largest record (a pcapng record of a 65535-byte frame),
// so a record straddles two blocks at most.
const smallBlock = blockSize / 16

// Pool is the memory the Files of an agent queue their records in, shared
// by all of them and bounded: a File takes a block from it when records
// come and it has none with room, and gives each back once written, and
// its last one when a flush found nothing more to write, so a capture that
// sees no traffic holds no block at all. A File that finds the pool
// exhausted drops the frames that needed a block and counts them, as when
// its own queue is full: the relay never waits for memory.
//
// The memory comes in regions of one huge page (2 MiB, see allocBlock),
// each lent whole as a big block or cut into sixteen small ones. The pool
// keeps the regions its Files gave back for a while, so that a busy link
// does not map and fault in a fresh huge page every 3 ms, and returns to
// the kernel those none of its Files needed during a whole trim interval.
type Pool struct {
	max      int // regions at most
	trimEach time.Duration

	mu      sync.Mutex
	regions int       // allocated
	whole   []*region // free and uncut
	cut     []*region // cut into small blocks, some of them free
	inUse   int64     // bytes lent
	refused uint64    // blocks asked for and not given: the pool was exhausted
	low     int       // fewest free whole regions since the last trim
	trimmer *time.Timer
}

// region is one huge page of a Pool's memory.
type region struct {
	mem     []byte
	release func()
	free    uint16 // with cut: bit i set when small block i is free
	cutAt   int    // index in Pool.cut, -1 when not there
}

const allSmallFree = 1<<(blockSize/smallBlock) - 1

// NewPool returns a pool that lends at most maxBytes (rounded up to whole 2
// MiB regions) and gives back to the kernel the regions no File needed for
// trimEach (0: one second).
func NewPool(maxBytes int64, trimEach time.Duration) *Pool {
	if trimEach <= 0 {
		trimEach = trimInterval
	}
	return &Pool{max: max(1, int((maxBytes+blockSize-1)/blockSize)), trimEach: trimEach}
}

var (
	defaultPool     *Pool
	defaultPoolOnce sync.Once
)

// DefaultPool is the pool of Files created with no Options.Pool: one per
// process, so one per agent. It lends at most an eighth of the machine's
// memory, between 256 MiB and 4 GiB (DefaultQueueBytes for 4 to 64 busy
// captures at once; a thousand quiet ones hold almost nothing).
func DefaultPool() *Pool {
	defaultPoolOnce.Do(func() {
		limit := int64(1 << 30)
		if m := totalMemory(); m > 0 {
			limit = m / 8
		}
		defaultPool = NewPool(min(max(limit, 256<<20), 4<<30), 0)
	})
	return defaultPool
}

// get lends a block: a big one when big and a whole region is free or may
// be allocated, else a small one. It returns nil when the pool is
// exhausted.
func (p *Pool) get(big bool) *block {
	p.mu.Lock()
	defer p.mu.Unlock()
	if big {
		if r := p.wholeLocked(); r != nil {
			p.inUse += blockSize
			return &block{b: r.mem[:0:blockSize], reg: r, chunk: -1}
		}
	}
	if len(p.cut) == 0 {
		r := p.wholeLocked()
		if r == nil {
			p.refused++
			return nil
		}
		r.free, r.cutAt = allSmallFree, len(p.cut)
		p.cut = append(p.cut, r)
	}
	r := p.cut[len(p.cut)-1]
	i := 0
	for r.free&(1<<i) == 0 {
		i++
	}
	r.free &^= 1 << i
	if r.free == 0 {
		p.uncutLocked(r)
	}
	p.inUse += smallBlock
	lo := i * smallBlock
	return &block{b: r.mem[lo:lo:(lo + smallBlock)], reg: r, chunk: i}
}

// wholeLocked takes a free whole region, allocating one if the pool may
// grow, or returns nil. p.mu must be held.
func (p *Pool) wholeLocked() *region {
	if k := len(p.whole); k > 0 {
		r := p.whole[k-1]
		p.whole[k-1] = nil
		p.whole = p.whole[:k-1]
		p.low = min(p.low, len(p.whole))
		return r
	}
	if p.regions >= p.max {
		return nil
	}
	p.regions++
	mem, release := allocBlock()
	return &region{mem: mem[:blockSize], release: release, cutAt: -1}
}

// uncutLocked removes r from p.cut. p.mu must be held.
func (p *Pool) uncutLocked(r *region) {
	last := p.cut[len(p.cut)-1]
	p.cut[r.cutAt], last.cutAt = last, r.cutAt
	p.cut[len(p.cut)-1] = nil
	p.cut = p.cut[:len(p.cut)-1]
	r.cutAt = -1
}

// put takes a block back. Its memory must not be touched any more.
func (p *Pool) put(blk *block) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := blk.reg
	blk.reg, blk.b = nil, nil
	if blk.chunk < 0 {
		p.inUse -= blockSize
		p.freeLocked(r)
		return
	}
	p.inUse -= smallBlock
	if r.free == 0 { // it was full: lend its blocks again
		r.cutAt = len(p.cut)
		p.cut = append(p.cut, r)
	}
	r.free |= 1 << blk.chunk
	if r.free == allSmallFree {
		p.uncutLocked(r)
		p.freeLocked(r)
	}
}

// freeLocked makes r a free whole region, to be given back to the kernel
// if no File takes it before two trims. p.mu must be held.
func (p *Pool) freeLocked(r *region) {
	r.free = 0
	p.whole = append(p.whole, r)
	if p.trimmer == nil {
		p.low = len(p.whole)
		p.trimmer = time.AfterFunc(p.trimEach, p.trim)
	}
}

// trim gives back to the kernel the free whole regions that no File needed
// since the last trim (as many as the fewest there were meanwhile), and
// comes again while any free whole region is left.
func (p *Pool) trim() {
	p.mu.Lock()
	var gone []*region
	if n := p.low; n > 0 {
		gone = append(gone, p.whole[:n]...) // the oldest
		p.whole = p.whole[:copy(p.whole, p.whole[n:])]
		clear(p.whole[len(p.whole):cap(p.whole)])
		p.regions -= n
	}
	p.low = len(p.whole)
	if len(p.whole) > 0 {
		p.trimmer.Reset(p.trimEach)
	} else {
		p.trimmer = nil
	}
	p.mu.Unlock()
	for _, r := range gone {
		r.release()
	}
}

// PoolStats is what a Pool holds.
type PoolStats struct {
	// InUse is the memory lent to Files now; Allocated what the pool holds
	// of the kernel's (lent, and free regions not given back yet); Max its
	// bound.
	InUse, Allocated, Max int64
	// Refused counts the blocks asked for when the pool was exhausted: the
	// Files that asked counted the frames as dropped.
	Refused uint64
}

// Stats returns what the pool holds.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{InUse: p.inUse, Allocated: int64(p.regions) * blockSize, Max: int64(p.max) * blockSize, Refused: p.refused}
}
