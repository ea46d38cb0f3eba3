package gormstore

import (
	"context"
	"strings"
	"time"

	"github.com/agentmarket/agentmarket/contracts"
	"github.com/agentmarket/agentmarket/migrations/relational"
)

var _ contracts.SentMessages = (*Store)(nil)

type sentRow struct {
	ListingID     string
	OrgID         string
	MessageID     string
	ContractID    string
	Digest        string
	ClaimID       string
	Stage         int
	TaskID        string
	ContextID     string
	State         string
	Result        []byte
	ResultVersion string
	ClaimedAt     time.Time
	HeldUntil     time.Time
	ExpiresAt     time.Time
}

func (sentRow) TableName() string { return "sent_messages" }

func (r *sentRow) record() *contracts.SentMessage {
	return &contracts.SentMessage{SentKey: contracts.SentKey{ListingID: r.ListingID, OrgID: r.OrgID, MessageID: r.MessageID},
		ContractID: r.ContractID, Digest: r.Digest, ClaimID: r.ClaimID, Stage: contracts.SentStage(r.Stage), TaskID: r.TaskID,
		ContextID: r.ContextID, State: r.State, Result: r.Result, ResultVersion: r.ResultVersion, ClaimedAt: r.ClaimedAt.UTC(),
		HeldUntil: r.HeldUntil.UTC(), ExpiresAt: r.ExpiresAt.UTC()}
}

// sentChunk is the most keys or records one statement carries.
const sentChunk = 64

// FindSent implements contracts.SentMessages: for the keys of each listing
// and org, one read of the primary key index per chunk of messageIds
// (padded to a power of two, so there are few statements to prepare).
func (s *Store) FindSent(ctx context.Context, keys []contracts.SentKey, now time.Time) ([]*contracts.SentMessage, error) {
	out := make([]*contracts.SentMessage, len(keys))
	type group struct{ listing, org string }
	groups := map[group][]int{}
	var order []group
	for i, k := range keys {
		g := group{k.ListingID, k.OrgID}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range order {
		idx := groups[g]
		for start := 0; start < len(idx); start += sentChunk {
			part := idx[start:min(start+sentChunk, len(idx))]
			n := 1
			for n < len(part) {
				n *= 2
			}
			args := make([]any, 0, n+4)
			args = append(args, g.listing, g.org)
			for j := range n {
				args = append(args, keys[part[min(j, len(part)-1)]].MessageID)
			}
			args = append(args, now.UTC(), int(contracts.SentReleased))
			var rows []sentRow
			if err := s.db.WithContext(ctx).Raw(findSentSQLs[n], args...).Scan(&rows).Error; err != nil {
				return nil, relational.Translate(err, "sent message")
			}
			for i := range rows {
				for _, j := range part {
					if keys[j].MessageID == rows[i].MessageID {
						out[j] = rows[i].record()
					}
				}
			}
		}
	}
	return out, nil
}

// findSentSQLs[n] reads the records of n messageIds of one listing and org.
var findSentSQLs = func() map[int]string {
	m := make(map[int]string)
	for n := 1; n <= sentChunk; n *= 2 {
		m[n] = "SELECT * FROM sent_messages WHERE listing_id = ? AND org_id = ? AND message_id IN (?" + strings.Repeat(", ?", n-1) +
			") AND expires_at > ? AND stage <> ?"
	}
	return m
}()

// sentCols are the columns RecordSent writes, in its order.
const sentCols = "listing_id, org_id, message_id, contract_id, digest, claim_id, stage, task_id, context_id, state, result, result_version, claimed_at, held_until, expires_at"

// sentUpsert is RecordSent's statement tail: a record of the same claim
// moves the stored one forward only; one of another claim replaces a
// replaceable record (contracts.SentMessage.Replaceable) and nothing else.
// The two placeholders are now, twice. (Within SET and WHERE,
// sent_messages.* is the stored row, excluded.* the record written.)
const sentUpsert = ` ON CONFLICT (listing_id, org_id, message_id) DO UPDATE SET
	contract_id = excluded.contract_id,
	digest = excluded.digest,
	claim_id = excluded.claim_id,
	claimed_at = excluded.claimed_at,
	expires_at = excluded.expires_at,
	stage = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR excluded.stage >= sent_messages.stage THEN excluded.stage ELSE sent_messages.stage END,
	task_id = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR excluded.task_id <> '' THEN excluded.task_id ELSE sent_messages.task_id END,
	context_id = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR excluded.context_id <> '' THEN excluded.context_id ELSE sent_messages.context_id END,
	state = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR (excluded.stage >= sent_messages.stage AND excluded.state <> '') THEN excluded.state ELSE sent_messages.state END,
	result = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR (excluded.stage >= sent_messages.stage AND excluded.result IS NOT NULL) THEN excluded.result ELSE sent_messages.result END,
	result_version = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR (excluded.stage >= sent_messages.stage AND excluded.result IS NOT NULL) THEN excluded.result_version ELSE sent_messages.result_version END,
	held_until = CASE WHEN sent_messages.claim_id <> excluded.claim_id OR excluded.stage >= sent_messages.stage THEN excluded.held_until ELSE sent_messages.held_until END
WHERE sent_messages.claim_id = excluded.claim_id OR sent_messages.expires_at <= ? OR sent_messages.stage = 3
	OR (sent_messages.stage = 0 AND sent_messages.task_id = '' AND sent_messages.held_until <= ?)
RETURNING listing_id, org_id, message_id, claim_id`

// sentSQLs[n] writes n records (chunk sizes are powers of two, so there
// are few statements to cache; see bindSQLs).
var sentSQLs = func() map[int]string {
	m := make(map[int]string)
	for n := 1; n <= sentChunk; n *= 2 {
		var b strings.Builder
		b.WriteString("INSERT INTO sent_messages (" + sentCols + ") VALUES ")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
		}
		b.WriteString(sentUpsert)
		m[n] = b.String()
	}
	return m
}()

// RecordSent implements contracts.SentMessages. A statement may not touch
// a row twice, so records of the same key go in successive rounds, in
// their order; each round is one statement per chunk.
func (s *Store) RecordSent(ctx context.Context, recs []contracts.SentMessage, now time.Time) ([]bool, error) {
	applied := make([]bool, len(recs))
	round := make([]int, len(recs)) // the round of each record
	seen := make(map[contracts.SentKey]int, len(recs))
	rounds := 0
	for i, r := range recs {
		round[i] = seen[r.SentKey]
		seen[r.SentKey]++
		rounds = max(rounds, round[i]+1)
	}
	db := s.db.WithContext(ctx)
	for rd := 0; rd < rounds; rd++ {
		var idx []int
		for i := range recs {
			if round[i] == rd {
				idx = append(idx, i)
			}
		}
		for start := 0; start < len(idx); {
			n := sentChunk
			for n > len(idx)-start {
				n /= 2
			}
			part := idx[start : start+n]
			args := make([]any, 0, 15*n+2)
			for _, i := range part {
				r := &recs[i]
				var result any // NULL, not an empty blob, when there is none
				if r.Result != nil {
					result = r.Result
				}
				args = append(args, r.ListingID, r.OrgID, r.MessageID, r.ContractID, r.Digest, r.ClaimID, int(r.Stage), r.TaskID,
					r.ContextID, r.State, result, r.ResultVersion, r.ClaimedAt.UTC(), r.HeldUntil.UTC(), r.ExpiresAt.UTC())
			}
			args = append(args, now.UTC(), now.UTC())
			rows, err := db.Raw(sentSQLs[n], args...).Rows()
			if err != nil {
				return nil, relational.Translate(err, "sent message")
			}
			type written struct {
				key   contracts.SentKey
				claim string
			}
			got := map[written]bool{}
			for rows.Next() {
				var w written
				if err := rows.Scan(&w.key.ListingID, &w.key.OrgID, &w.key.MessageID, &w.claim); err != nil {
					rows.Close()
					return nil, relational.Translate(err, "sent message")
				}
				got[w] = true
			}
			err = rows.Err()
			rows.Close()
			if err != nil {
				return nil, relational.Translate(err, "sent message")
			}
			for _, i := range part {
				applied[i] = got[written{recs[i].SentKey, recs[i].ClaimID}]
			}
			start += n
		}
	}
	return applied, nil
}

// PruneSent implements contracts.SentMessages.
func (s *Store) PruneSent(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at < ?", before.UTC()).Delete(&sentRow{})
	if res.Error != nil {
		return 0, relational.Translate(res.Error, "sent message")
	}
	return res.RowsAffected, nil
}
