package agentmarket

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"sync"
	"time"
)

// sortableEncoding is lower-case base32hex: unlike idEncoding's alphabet,
// its alphabet is in byte order, so equal-length ids compare bytewise as
// the numbers they encode.
var sortableEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// lastSortable is the last id NewSortableID made in this process.
var lastSortable struct {
	sync.Mutex
	ms  int64
	seq uint32
}

// NewSortableID returns an identifier with a type prefix, like
// "use_06h4ut1reoobe2cd", whose bytes sort in creation order: 48 bits of
// Unix milliseconds, then 32 bits that are random for a process's first id
// of a millisecond and one more for each next id of that millisecond. So a
// process's ids never repeat and sort as they were made (a clock stepping
// back keeps the last millisecond; 2^32 ids in one millisecond borrow the
// next), and ids of different processes sort by millisecond. Same length
// as NewID's. A store keyed by it appends to its index instead of writing
// at random places in it.
//
// Ids of two processes made in the same millisecond collide when their
// runs of 32-bit numbers overlap, about 2n/2^32 for n ids each in that
// millisecond: harmless for one writer, not negligible for several busy
// ones over months (NewID's 80 random bits are).
func NewSortableID(prefix string) string {
	return prefix + "_" + sortableID(time.Now().UnixMilli())
}

func sortableID(now int64) string {
	lastSortable.Lock()
	ms, seq := lastSortable.ms, lastSortable.seq+1
	switch {
	case now > ms:
		ms, seq = now, randomUint32()
	case seq == 0: // the millisecond's 2^32 numbers are used up
		ms++
	}
	lastSortable.ms, lastSortable.seq = ms, seq
	lastSortable.Unlock()
	var b [10]byte
	binary.BigEndian.PutUint64(b[:8], uint64(ms)<<16)
	binary.BigEndian.PutUint32(b[6:], seq)
	return sortableEncoding.EncodeToString(b[:])
}

func randomUint32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return binary.BigEndian.Uint32(b[:])
}
