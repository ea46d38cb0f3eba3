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

// sortable is the state of NewSortableID in this process: its random
// process part, and the last millisecond and sequence number it used.
var sortable = struct {
	sync.Mutex
	process [5]byte
	ms      int64
	seq     uint32
}{process: randomProcess()}

// sortableSeqBits is how many ids a process makes in one millisecond
// before it borrows the next.
const sortableSeqBits = 24

// NewSortableID returns an identifier with a type prefix, like
// "use_06h4ut1reoobe2cdk3f1q8g", whose bytes sort in creation order: 48 bits
// of Unix milliseconds, 40 bits drawn at random once per process, then a
// 24-bit sequence number, random at a process's first id of a millisecond
// and one more for each next id in it; 23 characters of lower-case
// base32hex (NewID's alphabet does not sort: its digits come after its
// letters). A process's ids never repeat and sort as they were made (a
// clock stepping back keeps the last millisecond; 2^24 ids in one
// millisecond borrow the next), ids of different processes sort by
// millisecond, and two processes' ids never collide unless their 40-bit
// parts are equal (one chance in 2^40 for a pair of processes). A store
// keyed by it appends to its index instead of writing at random places in
// it.
func NewSortableID(prefix string) string {
	return prefix + "_" + sortableID(time.Now().UnixMilli())
}

func sortableID(now int64) string {
	sortable.Lock()
	ms, seq := sortable.ms, (sortable.seq+1)&(1<<sortableSeqBits-1)
	switch {
	case now > ms:
		ms, seq = now, randomUint32()&(1<<sortableSeqBits-1)
	case seq == 0: // the millisecond's numbers are used up
		ms++
	}
	sortable.ms, sortable.seq = ms, seq
	process := sortable.process
	sortable.Unlock()
	var b [14]byte
	binary.BigEndian.PutUint64(b[:8], uint64(ms)<<16)
	copy(b[6:11], process[:])
	b[11], b[12], b[13] = byte(seq>>16), byte(seq>>8), byte(seq)
	return sortableEncoding.EncodeToString(b[:])
}

func randomProcess() (p [5]byte) {
	if _, err := rand.Read(p[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return p
}

func randomUint32() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return binary.BigEndian.Uint32(b[:])
}
