package spool

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/metering"
)

// A spool record is
//
//	length  uint32 little endian: the payload's length in bytes
//	crc     uint32 little endian: CRC-32C of the length bytes and the payload
//	payload version byte (recordV1), then the metering.Usage fields in declaration
//	        order: strings as uvarint length + bytes, integers as zigzag
//	        varints, Time as varint Unix milliseconds, Estimated as one byte;
//	        a row with pending usage is recordV2: the same, then the
//	        PendingBill (Key, Cum, Add, Rates, in declaration order);
//	        a row that binds its task is recordV3: the fields, a flags byte
//	        (1: pending, 2: binds, 4: the binding is stored already), the
//	        PendingBill when flagged, then the Binding (ParentListingID,
//	        DeadlineAt as varint Unix ms, 0 none);
//	        a row that records a sent message is recordV5: recordV3's layout
//	        (the flags byte always there), flag 8 set, then the Sent
//	        (MessageID, Digest, ClaimID, ClaimedAt, HeldUntil, ExpiresAt as
//	        varint Unix ms, Done as one byte, Result, ResultVersion) after the
//	        Binding;
//	        a row whose task the agent lost is recordV6: recordV5's layout
//	        (the flags byte always there) with flag 16 set;
//	        a row billed when it was recorded is recordV7: recordV6's layout
//	        with flag 32 set and, after the Sent, the task's billed counters
//	        (Usage.Billed: InputTokens, OutputTokens, ComputeMs);
//	        flag 64: the Binding's Endpoint follows its DeadlineAt (a
//	        listing with several agent endpoints);
//	        a row with tags is recordV4: that byte, then one of the above
//	        (its own version byte and fields), then the Tags string
//
// The frame is agentmarket's (BeginFrame, EndFrame, NextFrame): the CRC
// covers the length too, so a zero-filled tail (what some file systems show
// after a power loss) is never taken for a record. A new field means a new
// version byte; decoders keep reading the old versions.
const (
	recordHeader = agentmarket.FrameHeader
	recordV1     = 1
	recordV2     = 2
	recordV3     = 3
	recordV4     = 4 // a tagged row: recordV4, then a V1-V3, V5 or V6 payload, then its tags
	recordV5     = 5 // recordV3's layout with a Sent
	recordV6     = 6 // recordV5's layout, flagLost set
	recordV7     = 7 // recordV6's layout with the task's billed counters (flagBilled)

	flagPending = 1
	flagBinds   = 2
	flagStored  = 4 // the binding is in the database already (Binding.Stored)
	flagSent    = 8
	flagLost    = 16 // Usage.Lost: no field of its own
	flagBilled  = 32
	// flagEndpoint: the Binding's Endpoint follows its DeadlineAt.
	flagEndpoint = 64
)

var (
	errTorn    = agentmarket.ErrTornFrame
	errTooBig  = errors.New("usage row encodes to more than 16 MiB")
	errVersion = errors.New("unknown record version")
)

// appendRecord appends the record of u to b.
func appendRecord(b []byte, u *metering.Usage) ([]byte, error) {
	start := len(b)
	version := byte(recordV1)
	switch {
	case u.Billed != nil:
		version = recordV7
	case u.Lost:
		version = recordV6
	case u.Sent != nil:
		version = recordV5
	case u.Binds != nil:
		version = recordV3
	case u.Pending != nil:
		version = recordV2
	}
	b = agentmarket.BeginFrame(b)
	if u.Tags != "" {
		b = append(b, recordV4)
	}
	b = append(b, version)
	b = appendString(b, u.ID)
	b = binary.AppendVarint(b, u.Time.UnixMilli())
	b = appendString(b, u.TraceID)
	b = appendString(b, u.TaskID)
	b = appendString(b, u.ContextID)
	b = appendString(b, u.ParentTaskID)
	b = appendString(b, u.ListingID)
	b = appendString(b, u.SellerOrgID)
	b = appendString(b, u.BuyerOrgID)
	b = appendString(b, u.APIKeyID)
	b = appendString(b, u.ContractID)
	b = appendString(b, u.Method)
	b = appendString(b, u.ProtocolVersion)
	b = appendString(b, u.State)
	b = binary.AppendVarint(b, int64(u.ErrorCode))
	b = binary.AppendVarint(b, u.BytesIn)
	b = binary.AppendVarint(b, u.BytesOut)
	b = binary.AppendVarint(b, u.LatencyMs)
	b = binary.AppendVarint(b, u.InputTokens)
	b = binary.AppendVarint(b, u.OutputTokens)
	b = binary.AppendVarint(b, u.ComputeMs)
	b = binary.AppendVarint(b, u.Tasks)
	b = binary.AppendVarint(b, u.CostMicros)
	b = appendString(b, u.Currency)
	if u.Estimated {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = appendString(b, u.CardHash)
	b = appendString(b, u.Model)
	if version >= recordV3 {
		flags := byte(0)
		if u.Binds != nil {
			flags |= flagBinds
			if u.Binds.Stored {
				flags |= flagStored
			}
			if u.Binds.Endpoint != "" {
				flags |= flagEndpoint
			}
		}
		if u.Pending != nil {
			flags |= flagPending
		}
		if u.Sent != nil {
			flags |= flagSent
		}
		if u.Lost {
			flags |= flagLost
		}
		if u.Billed != nil {
			flags |= flagBilled
		}
		b = append(b, flags)
	}
	if p := u.Pending; p != nil {
		b = appendString(b, p.Key)
		for _, v := range [...]int64{p.Cum.InputTokens, p.Cum.OutputTokens, p.Cum.ComputeMs, p.Add.InputTokens, p.Add.OutputTokens, p.Add.ComputeMs,
			p.Rates.InputTokensPerMillion, p.Rates.OutputTokensPerMillion, p.Rates.ComputePerHour, p.Rates.PerTask} {
			b = binary.AppendVarint(b, v)
		}
	}
	if bd := u.Binds; bd != nil {
		b = appendString(b, bd.ParentListingID)
		var ms int64
		if !bd.DeadlineAt.IsZero() {
			ms = bd.DeadlineAt.UnixMilli()
		}
		b = binary.AppendVarint(b, ms)
		if bd.Endpoint != "" {
			b = appendString(b, bd.Endpoint)
		}
	}
	if sm := u.Sent; sm != nil {
		b = appendString(b, sm.MessageID)
		b = appendString(b, sm.Digest)
		b = appendString(b, sm.ClaimID)
		b = binary.AppendVarint(b, sm.ClaimedAt.UnixMilli())
		b = binary.AppendVarint(b, sm.HeldUntil.UnixMilli())
		b = binary.AppendVarint(b, sm.ExpiresAt.UnixMilli())
		if sm.Done {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(sm.Result)))
		b = append(b, sm.Result...)
		b = appendString(b, sm.ResultVersion)
	}
	if c := u.Billed; c != nil {
		b = binary.AppendVarint(b, c.InputTokens)
		b = binary.AppendVarint(b, c.OutputTokens)
		b = binary.AppendVarint(b, c.ComputeMs)
	}
	if u.Tags != "" {
		b = appendString(b, string(u.Tags))
	}

	b, err := agentmarket.EndFrame(b, start)
	if errors.Is(err, agentmarket.ErrFrameTooLarge) {
		return b, errTooBig
	}
	return b, err
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// nextRecord checks the record at the start of b (agentmarket.NextFrame):
// n == 0 means b holds only the start of a record (read more, or it is a
// torn tail), errTorn a record that can never be valid.
func nextRecord(b []byte) (payload []byte, n int, err error) { return agentmarket.NextFrame(b) }

// decodePayload fills u from a record payload whose CRC checked out. All
// strings of a row share one allocation.
func decodePayload(p []byte, u *metering.Usage) error {
	tagged := len(p) > 1 && p[0] == recordV4
	if tagged {
		p = p[1:]
	}
	if len(p) == 0 || p[0] < recordV1 || p[0] > recordV7 || p[0] == recordV4 {
		return errVersion
	}
	d := decoder{s: string(p[1:])}
	u.ID = d.str()
	u.Time = time.UnixMilli(d.varint()).UTC()
	u.TraceID = d.str()
	u.TaskID = d.str()
	u.ContextID = d.str()
	u.ParentTaskID = d.str()
	u.ListingID = d.str()
	u.SellerOrgID = d.str()
	u.BuyerOrgID = d.str()
	u.APIKeyID = d.str()
	u.ContractID = d.str()
	u.Method = d.str()
	u.ProtocolVersion = d.str()
	u.State = d.str()
	u.ErrorCode = int(d.varint())
	u.BytesIn = d.varint()
	u.BytesOut = d.varint()
	u.LatencyMs = d.varint()
	u.InputTokens = d.varint()
	u.OutputTokens = d.varint()
	u.ComputeMs = d.varint()
	u.Tasks = d.varint()
	u.CostMicros = d.varint()
	u.Currency = d.str()
	u.Estimated = d.byte() == 1
	u.CardHash = d.str()
	u.Model = d.str()
	u.Pending, u.Binds, u.Sent, u.Billed = nil, nil, nil, nil
	flags := byte(0)
	switch p[0] {
	case recordV2:
		flags = flagPending
	case recordV3, recordV5, recordV6, recordV7:
		flags = d.byte()
	}
	u.Lost = flags&flagLost != 0
	if flags&flagPending != 0 {
		pb := &metering.PendingBill{Key: d.str()}
		for _, v := range [...]*int64{&pb.Cum.InputTokens, &pb.Cum.OutputTokens, &pb.Cum.ComputeMs, &pb.Add.InputTokens, &pb.Add.OutputTokens, &pb.Add.ComputeMs,
			&pb.Rates.InputTokensPerMillion, &pb.Rates.OutputTokensPerMillion, &pb.Rates.ComputePerHour, &pb.Rates.PerTask} {
			*v = d.varint()
		}
		u.Pending = pb
	}
	if flags&flagBinds != 0 {
		bd := &metering.Binding{ParentListingID: d.str(), Stored: flags&flagStored != 0}
		if ms := d.varint(); ms != 0 {
			bd.DeadlineAt = time.UnixMilli(ms).UTC()
		}
		if flags&flagEndpoint != 0 {
			bd.Endpoint = d.str()
		}
		u.Binds = bd
	}
	if flags&flagSent != 0 {
		sm := &metering.Sent{MessageID: d.str(), Digest: d.str(), ClaimID: d.str()}
		sm.ClaimedAt = time.UnixMilli(d.varint()).UTC()
		sm.HeldUntil = time.UnixMilli(d.varint()).UTC()
		sm.ExpiresAt = time.UnixMilli(d.varint()).UTC()
		sm.Done = d.byte() == 1
		if r := d.str(); r != "" {
			sm.Result = []byte(r)
		}
		sm.ResultVersion = d.str()
		u.Sent = sm
	}
	if flags&flagBilled != 0 {
		u.Billed = &metering.Counters{InputTokens: d.varint(), OutputTokens: d.varint(), ComputeMs: d.varint()}
	}
	u.Tags = ""
	if tagged {
		u.Tags = agentmarket.Tags(d.str())
	}
	if d.bad || d.i != len(d.s) {
		return errTorn
	}
	return nil
}

// decoder reads fields from a payload held as one string, so that the
// strings it returns are substrings of it rather than copies.
type decoder struct {
	s   string
	i   int
	bad bool
}

func (d *decoder) uvarint() uint64 {
	var x uint64
	var shift uint
	for d.i < len(d.s) {
		c := d.s[d.i]
		d.i++
		if c < 0x80 {
			if shift == 63 && c > 1 {
				d.bad = true
				return 0
			}
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
		if shift > 63 {
			break
		}
	}
	d.bad = true
	return 0
}

func (d *decoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.s)-d.i) {
		d.bad = true
		return ""
	}
	s := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

func (d *decoder) byte() byte {
	if d.i >= len(d.s) {
		d.bad = true
		return 0
	}
	c := d.s[d.i]
	d.i++
	return c
}
