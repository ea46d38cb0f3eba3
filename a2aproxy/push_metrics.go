package a2aproxy

import "github.com/prometheus/client_golang/prometheus"

// pushMetrics are the series of the push delivery's flood handling.
type pushMetrics struct {
	held      *prometheus.CounterVec
	coalesced prometheus.Counter
	paused    prometheus.Counter
	waiting   prometheus.Gauge
	ownCaps   prometheus.Gauge
	inflight  prometheus.Gauge
}

func newPushMetrics(reg prometheus.Registerer) *pushMetrics {
	m := &pushMetrics{
		held: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_deliveries_held_total",
			Help: "Claimed push deliveries the meter gave back to the outbox unsent, by reason (retry_after: their webhook asked to wait; paused: it failed every attempt for long; held: another meter saw either; config_rate: their push config's own rate lets them start later)."}, []string{"reason"}),
		paused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_destination_pauses_total",
			Help: "Push destinations (webhook servers) paused after failing every attempt for long; the orgs concerned are told through their alert webhooks."}),
		coalesced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_coalesced_total",
			Help: "Status updates not sent to a webhook because a later status of the same task and config, delivered, stood for them."}),
	}
	m.waiting = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_deliveries_waiting",
		Help: "Push deliveries this meter claimed that wait for a delivery slot or for their webhook's caps (concurrency, rate)."})
	m.ownCaps = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_deliveries_waiting_own_caps",
		Help: "Of the push deliveries waiting, those of orgs that lowered the caps of their deliveries to that webhook server (PUT /api/v1/push-caps)."})
	m.inflight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "agentmarket", Subsystem: "meter", Name: "push_deliveries_in_flight",
		Help: "Push deliveries this meter is sending now (at most 32)."})
	reg.MustRegister(m.held, m.coalesced, m.paused, m.waiting, m.ownCaps, m.inflight)
	return m
}

func (m *Metrics) pushHeld(reason string, n int) {
	if m != nil && m.push != nil {
		m.push.held.WithLabelValues(reason).Add(float64(n))
	}
}

func (m *Metrics) pushCoalesced(n int) {
	if m != nil && m.push != nil && n > 0 {
		m.push.coalesced.Add(float64(n))
	}
}

func (m *Metrics) pushPaused() {
	if m != nil && m.push != nil {
		m.push.paused.Inc()
	}
}

// pushQueue notes how many claimed deliveries wait (own of them under
// their org's own caps) and how many are being sent.
func (m *Metrics) pushQueue(waiting, own, inflight int) {
	if m != nil && m.push != nil {
		m.push.waiting.Set(float64(waiting))
		m.push.ownCaps.Set(float64(own))
		m.push.inflight.Set(float64(inflight))
	}
}
