// Package chartcheck checks the Helm chart (docs/deploy/helm/agentmarket)
// without a cluster: helm lint, and every manifest helm template renders
// decoded strictly into the Kubernetes API's own Go types (an unknown or
// misplaced field fails), with the chart's promises checked on them.
//
// It is a module of its own so that the Kubernetes API types it needs stay
// out of AgentMarket's go.mod; scripts/test.sh runs it with the helm
// binary it installs (AGENTMARKET_TEST_HELM).
package chartcheck
