package a2aproxy

import (
	"github.com/agentmarket/agentmarket/a2aproxy/wire"
)

// observed accumulates what a call's answers said about the task: ids,
// state, the agent's own usage report, and the text the estimate falls
// back to.
type observed struct {
	taskID    string
	contextID string
	state     string
	terminal  bool
	bound     bool
	reported  *wire.Reported
	artifacts map[string]string // artifact id → text so far (honouring append)
	agentText map[string]bool   // agent message texts, each counted once
	order     []string
}

func (o *observed) add(ob wire.Observation) {
	if ob.TaskID != "" {
		if ob.TaskID != o.taskID {
			o.bound = false
		}
		o.taskID = ob.TaskID
	}
	if ob.ContextID != "" {
		o.contextID = ob.ContextID
	}
	if ob.State != "" {
		o.state = ob.State
		o.terminal = ob.Terminal
	}
	if r := ob.Usage; r != nil {
		if o.reported == nil {
			o.reported = &wire.Reported{}
		}
		o.reported.InputTokens = max(o.reported.InputTokens, r.InputTokens)
		o.reported.OutputTokens = max(o.reported.OutputTokens, r.OutputTokens)
		o.reported.ComputeMs = max(o.reported.ComputeMs, r.ComputeMs)
		if r.Model != "" {
			o.reported.Model = r.Model
		}
	}
	if o.artifacts == nil {
		o.artifacts = map[string]string{}
		o.agentText = map[string]bool{}
	}
	for _, a := range ob.Artifacts {
		if _, ok := o.artifacts[a.ArtifactID]; !ok {
			o.order = append(o.order, a.ArtifactID)
		}
		if a.Append {
			o.artifacts[a.ArtifactID] += a.Text
		} else {
			o.artifacts[a.ArtifactID] = a.Text
		}
	}
	for _, t := range ob.AgentTexts {
		o.agentText[t] = true
	}
}

// outputEstimate is the estimated output tokens of the task so far: its
// artifacts (with appended chunks joined) and the agent's messages.
func (o *observed) outputEstimate() int64 {
	var n int64
	for _, id := range o.order {
		n += wire.EstimateTokens(o.artifacts[id])
	}
	for t := range o.agentText {
		n += wire.EstimateTokens(t)
	}
	return n
}
