package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/agentmarket/agentmarket"
	"github.com/agentmarket/agentmarket/contracts"
)

var _ contracts.TaskOwners = (*Store)(nil)

// A task's binding is a hash under ownerKey: o org, c contract, x context,
// ca created at, pl/pt parent listing and task, dl deadline, ru reused at,
// ep endpoint, k the API key whose call created it.
// Its end and its bill live in the database's row, not here.
func (s *Store) ownerKey(listingID, taskID string) string {
	return s.prefix + "o:" + listingID + "|" + taskID
}

// bindScript records a binding unless the task is bound, and returns the
// owner now recorded. ARGV: ttl ms, then the fields in hash order.
var bindScript = goredis.NewScript(`
local o = redis.call('HGET', KEYS[1], 'o')
if o then return o end
redis.call('HSET', KEYS[1], 'o', ARGV[2], 'c', ARGV[3], 'x', ARGV[4], 'ca', ARGV[5], 'pl', ARGV[6], 'pt', ARGV[7], 'dl', ARGV[8], 'ru', '', 'ep', ARGV[9], 'k', ARGV[10])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return ARGV[2]
`)

// BindTask records t's org as the task's owner unless it is bound, and
// returns the owner now recorded.
func (s *Store) BindTask(ctx context.Context, t contracts.TaskBinding) (string, error) {
	owners, errs := s.BindTasks(ctx, []contracts.TaskBinding{t})
	return owners[0], errs[0]
}

// BindTasks binds many tasks in one pipeline; each binding is atomic.
func (s *Store) BindTasks(ctx context.Context, bs []contracts.TaskBinding) ([]string, []error) {
	owners, errs := make([]string, len(bs)), make([]error, len(bs))
	err := s.up()
	if err == nil {
		err = s.bindTasks(ctx, bs, owners)
		if s.noScript(err) {
			err = s.bindTasks(ctx, bs, owners)
		}
	}
	if err != nil {
		err = s.failed(err)
		for i := range errs {
			errs[i] = err
		}
	}
	return owners, errs
}

func (s *Store) bindTasks(ctx context.Context, bs []contracts.TaskBinding, owners []string) error {
	if err := s.loadScripts(ctx); err != nil {
		return err
	}
	cmds := make([]*goredis.Cmd, len(bs))
	_, err := s.c.Pipelined(ctx, func(pl goredis.Pipeliner) error {
		for i := range bs {
			b := &bs[i]
			var dl string
			if b.DeadlineAt != nil {
				dl = encTime(*b.DeadlineAt)
			}
			cmds[i] = bindScript.EvalSha(ctx, pl, []string{s.ownerKey(b.ListingID, b.TaskID)}, s.bindingTTL.Milliseconds(),
				b.OrgID, b.ContractID, b.ContextID, encTime(b.CreatedAt), b.ParentListingID, b.ParentTaskID, dl, b.Endpoint, b.KeyID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, c := range cmds {
		o, err := c.Text()
		if err != nil {
			return err
		}
		owners[i] = o
	}
	return nil
}

// TaskOwner returns the task's binding, or NotFound when Redis holds none
// (never bound, or its time to live is over: the database has it then).
func (s *Store) TaskOwner(ctx context.Context, listingID, taskID string) (*contracts.TaskBinding, error) {
	if err := s.up(); err != nil {
		return nil, err
	}
	h, err := s.c.HGetAll(ctx, s.ownerKey(listingID, taskID)).Result()
	if err != nil {
		return nil, s.failed(err)
	}
	if h["o"] == "" {
		return nil, agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no task %q on listing %q", taskID, listingID)
	}
	return &contracts.TaskBinding{ListingID: listingID, TaskID: taskID, OrgID: h["o"], ContractID: h["c"], ContextID: h["x"],
		CreatedAt: decTime(h["ca"]), ParentListingID: h["pl"], ParentTaskID: h["pt"], DeadlineAt: decTimePtr(h["dl"]), ReusedAt: decTimePtr(h["ru"]),
		Endpoint: h["ep"], KeyID: h["k"]}, nil
}

// markReusedScript sets the reuse mark unless it is set; 0 when the task
// is not bound here.
var markReusedScript = goredis.NewScript(`
local ru = redis.call('HGET', KEYS[1], 'ru')
if not ru then return 0 end
if ru == '' then redis.call('HSET', KEYS[1], 'ru', ARGV[1]) end
return 1
`)

// MarkTaskReused records that the agent reused the bound task's id; the
// first mark stays. NotFound for a task Redis does not hold.
func (s *Store) MarkTaskReused(ctx context.Context, listingID, taskID string, at time.Time) error {
	if err := s.up(); err != nil {
		return err
	}
	n, err := markReusedScript.Run(ctx, s.c, []string{s.ownerKey(listingID, taskID)}, encTime(at)).Int()
	if err != nil {
		return s.failed(err)
	}
	if n == 0 {
		return agentmarket.Errorf(agentmarket.NotFound, "task_not_found", "no task %q on listing %q", taskID, listingID)
	}
	return nil
}
