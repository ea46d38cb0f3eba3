package agentmarket

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
)

// The durable local files of a process (the meter's usage spool, its log
// of sent messages) share these: a directory one process at a time may
// open, files synced for a power loss, and the directory synced once a file
// was created in it.

// SyncDir fsyncs a directory, so that a file created in it survives a
// power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// A framed record, as the local files write them: its payload's length
// (uint32, little endian), the CRC-32C of those four bytes and the payload
// (uint32, little endian), then the payload. The CRC covers the length
// too, so a zero-filled tail (what some file systems show after a power
// loss) is never taken for a record.
const (
	// FrameHeader is the bytes before a frame's payload.
	FrameHeader = 8
	// MaxFramePayload bounds a payload: far above any real record, it lets
	// a garbage length in a torn tail be refused without reading it.
	MaxFramePayload = 1 << 24
)

var frameCRC = crc32.MakeTable(crc32.Castagnoli)

// ErrTornFrame is a frame that can never be valid: a bad length or CRC.
var ErrTornFrame = errors.New("torn or corrupt record")

// ErrFrameTooLarge is a payload past MaxFramePayload.
var ErrFrameTooLarge = errors.New("a record of more than 16 MiB")

// BeginFrame starts a frame at the end of b: append the payload after it,
// then EndFrame(b, start) with start the length of b before.
func BeginFrame(b []byte) []byte { return append(b, 0, 0, 0, 0, 0, 0, 0, 0) }

// EndFrame fills the header of the frame begun at start; a payload past
// MaxFramePayload is cut off and refused.
func EndFrame(b []byte, start int) ([]byte, error) {
	n := len(b) - start - FrameHeader
	if n > MaxFramePayload {
		return b[:start], ErrFrameTooLarge
	}
	binary.LittleEndian.PutUint32(b[start:], uint32(n))
	crc := crc32.Update(0, frameCRC, b[start:start+4])
	crc = crc32.Update(crc, frameCRC, b[start+FrameHeader:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b, nil
}

// NextFrame checks the frame at the start of b. It returns the payload and
// the frame's whole length; n == 0 with no error means b holds only the
// start of a frame (read more, or it is a torn tail), ErrTornFrame a frame
// that can never be valid.
func NextFrame(b []byte) (payload []byte, n int, err error) {
	if len(b) < FrameHeader {
		return nil, 0, nil
	}
	length := binary.LittleEndian.Uint32(b)
	if length == 0 || length > MaxFramePayload {
		return nil, 0, ErrTornFrame
	}
	if len(b) < FrameHeader+int(length) {
		return nil, 0, nil
	}
	payload = b[FrameHeader : FrameHeader+int(length)]
	crc := crc32.Update(0, frameCRC, b[:4])
	crc = crc32.Update(crc, frameCRC, payload)
	if crc != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, ErrTornFrame
	}
	return payload, FrameHeader + int(length), nil
}
