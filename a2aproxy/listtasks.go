package a2aproxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// ListTasks through the meter pages over the caller's own tasks.
//
// The agent sees only the marketplace's credentials, so it lists every
// buyer's tasks; the meter reads the agent's pages (100 tasks each, the
// 1.0 maximum) and keeps the caller's, until the caller's page is full:
// pageSize (default 50, 1 to 100, as the specification says) of the
// caller's tasks, a nextPageToken of the meter's that resumes exactly
// after the last task given, and totalSize the caller's own count, counted
// on the first page and carried in the token. The token is sealed (the
// agent's own page token inside it could name another org's task) and
// bound to the listing and the org; nothing in an answer tells how many
// tasks other buyers have.
const (
	listDefaultPage = 50
	listMaxPage     = 100
	// listMaxAgentPages bounds the agent calls one ListTasks may make; a
	// list longer than this many agent pages is counted up to there (the
	// totalSize is then a lower bound) and a page may come back short,
	// with a token that goes on.
	listMaxAgentPages = 20
)

// listCursor is where a caller's next page starts in the agent's list.
type listCursor struct {
	AgentToken string `json:"t,omitempty"` // the agent's page token ("": its first page)
	Skip       int    `json:"s,omitempty"` // tasks of that agent page already given
	Total      int    `json:"n"`           // the caller's own count, from the first page
}

func (p *Proxy) listTasks(c exchange, cl *call) error {
	ctx, cancel := context.WithTimeout(p.Base, cl.lim.RequestTimeout)
	defer cancel()
	var params map[string]json.RawMessage
	if len(cl.req.Params) > 0 {
		if err := json.Unmarshal(cl.req.Params, &params); err != nil {
			return p.fail(c, cl, wire.InvalidParams("params: "+err.Error()))
		}
	}
	if params == nil {
		params = map[string]json.RawMessage{}
	}
	size := listDefaultPage
	if v, ok := params["pageSize"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &size); err != nil || size < 1 || size > listMaxPage {
			return p.fail(c, cl, wire.InvalidParams(fmt.Sprintf("params.pageSize must be an integer from 1 to %d", listMaxPage)))
		}
	}
	var token string
	if v, ok := params["pageToken"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &token); err != nil {
			return p.fail(c, cl, wire.InvalidParams("params.pageToken must be a string"))
		}
	}
	first := token == ""
	cur := listCursor{}
	if !first {
		var err error
		if cur, err = p.openListToken(cl, token); err != nil {
			return p.fail(c, cl, wire.InvalidParams("params.pageToken is not a token this listing gave you"))
		}
	}

	// On the first page the meter reads on past a full page to count the
	// caller's tasks (totalSize); later pages carry the count.
	counting := first
	var kept []json.RawMessage
	var next listCursor
	more := false // the caller has tasks past this page, or may have
	count := 0    // the caller's tasks seen
	agentToken, skip := cur.AgentToken, cur.Skip
scan:
	for page := 0; ; page++ {
		if page == listMaxAgentPages {
			// As far as one call reads: the next page resumes here.
			if len(kept) < size {
				next = listCursor{AgentToken: agentToken, Skip: skip}
			}
			more = true
			break
		}
		tasks, agentNext, err := p.agentTaskPage(ctx, cl, params, agentToken)
		if err != nil {
			return p.fail(c, cl, err)
		}
		for i := skip; i < len(tasks); i++ {
			own, err := p.ownListed(ctx, cl, tasks[i])
			if err != nil {
				return p.fail(c, cl, err)
			}
			if !own {
				continue
			}
			count++
			if len(kept) < size {
				kept = append(kept, tasks[i])
				next = listCursor{AgentToken: agentToken, Skip: i + 1}
				continue
			}
			more = true
			if !counting {
				break scan
			}
		}
		if agentNext == "" {
			break
		}
		if len(kept) == size && !counting {
			// Full at the end of an agent page: whether more follow is
			// known only by reading on, which the next page does (it may
			// come back empty: the specification allows a token before
			// the end).
			next, more = listCursor{AgentToken: agentNext}, true
			break
		}
		agentToken, skip = agentNext, 0
	}
	total := cur.Total
	if first {
		total = count
	}
	out := map[string]any{"tasks": nonNilRaw(kept), "pageSize": size, "totalSize": total, "nextPageToken": ""}
	if more {
		next.Total = total
		tok, err := p.sealListToken(cl, next)
		if err != nil {
			return p.fail(c, cl, err)
		}
		out["nextPageToken"] = tok
	}
	result, err := json.Marshal(out)
	if err != nil {
		return p.fail(c, cl, err)
	}
	return p.answer(ctx, c, cl, result)
}

// agentTaskPage reads one page of the agent's list: the caller's filters,
// the agent's own page token, its largest page.
func (p *Proxy) agentTaskPage(ctx context.Context, cl *call, params map[string]json.RawMessage, agentToken string) ([]json.RawMessage, string, error) {
	prm := make(map[string]json.RawMessage, len(params)+2)
	for k, v := range params {
		prm[k] = v
	}
	prm["pageSize"] = json.RawMessage(fmt.Sprint(listMaxPage))
	delete(prm, "pageToken")
	if agentToken != "" {
		prm["pageToken"], _ = json.Marshal(agentToken)
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "agentmarket-list", "method": wire.MethodName(wire.MethodListTasks, wire.V10), "params": prm})
	if err != nil {
		return nil, "", err
	}
	up, werr := wire.ParseRequest(body, string(wire.V10))
	if werr != nil {
		return nil, "", werr
	}
	result, agentErr, err := p.callAgent(ctx, cl, up)
	if err != nil {
		return nil, "", err
	}
	if agentErr != nil {
		return nil, "", wire.TranslateError(cl.upVersion, cl.req.Version, agentErr)
	}
	var page struct {
		Tasks         []json.RawMessage `json:"tasks"`
		NextPageToken string            `json:"nextPageToken"`
	}
	if err := json.Unmarshal(result, &page); err != nil {
		return nil, "", rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's task list is not valid JSON")
	}
	if page.NextPageToken == agentToken && page.NextPageToken != "" {
		return nil, "", rpcErr(CodeUpstreamInvalid, http.StatusOK, "the agent's task list gives the same page token again")
	}
	return page.Tasks, page.NextPageToken, nil
}

// ownListed reports whether a listed task is the caller's to see.
func (p *Proxy) ownListed(ctx context.Context, cl *call, task json.RawMessage) (bool, error) {
	var head struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(task, &head) != nil || head.ID == "" {
		return false, nil
	}
	b, err := p.owners.Known(ctx, cl.target.ListingID, head.ID)
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return mayRelay(b, cl.actor.OrgID), nil
}

func nonNilRaw(v []json.RawMessage) []json.RawMessage {
	if v == nil {
		return []json.RawMessage{}
	}
	return v
}

// listTokenContext binds a page token to the listing and the org.
func listTokenContext(cl *call) []byte {
	return []byte("list-tasks|" + cl.target.ListingID + "|" + cl.actor.OrgID)
}

func (p *Proxy) sealListToken(cl *call, cur listCursor) (string, error) {
	plain, err := json.Marshal(cur)
	if err != nil {
		return "", err
	}
	sealed, err := p.Sealer.Seal(plain, listTokenContext(cl))
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

func (p *Proxy) openListToken(cl *call, tok string) (listCursor, error) {
	var cur listCursor
	sealed, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cur, err
	}
	plain, err := p.Sealer.Open(sealed, listTokenContext(cl))
	if err != nil {
		return cur, err
	}
	err = json.Unmarshal(plain, &cur)
	return cur, err
}
