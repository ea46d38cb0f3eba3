package spool

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentmarket/agentmarket/metering"
)

// tracedBatches wraps the shipper's store and settling so that each batch
// inserted and each batch settled is a span (ShipperOptions.Tracer): a
// trace backend then shows how long usage waits for its store and its
// projections, and every failed attempt. Each batch begins a trace of its
// own: a batch holds the rows of many calls.
func tracedBatches(t trace.Tracer, store metering.Store, settle func(context.Context, []metering.Usage) error) (metering.Store, func(context.Context, []metering.Usage) error) {
	if settle != nil {
		inner := settle
		settle = func(ctx context.Context, rows []metering.Usage) error {
			return inSpan(ctx, t, "usage batch settle", rows, func(ctx context.Context) error { return inner(ctx, rows) })
		}
	}
	return tracedStore{Store: store, tracer: t}, settle
}

// tracedStore is a Store whose inserts are spans.
type tracedStore struct {
	metering.Store
	tracer trace.Tracer
}

func (s tracedStore) Insert(ctx context.Context, rows []metering.Usage) error {
	return inSpan(ctx, s.tracer, "usage batch insert", rows, func(ctx context.Context) error { return s.Store.Insert(ctx, rows) })
}

// inSpan runs f under a new root span named name, about rows.
func inSpan(ctx context.Context, t trace.Tracer, name string, rows []metering.Usage, f func(context.Context) error) error {
	ctx, span := t.Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.Int("agentmarket.usage.rows", len(rows))))
	defer span.End()
	err := f(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}
