// Package wire reads and writes the A2A JSON-RPC wire format for the
// metering proxy, in both protocol versions the marketplace speaks: 0.3
// and 1.0.
//
// The proxy relays bytes. This package parses only what metering and
// routing need (method, ids, task and context ids, states, texts, usage
// reports) and never re-encodes a body it does not have to change, so
// members it does not know survive. Translation between versions rewrites
// only the members whose names or shapes differ and copies every other
// member through, in its original order.
//
// Values parsed from a body (Request.ID, Request.Params, Response.Result,
// Event.Data, ...) may alias that body: do not modify a body while its
// parsed values are in use.
//
// Version rules (specification 1.0.1, §3.6): the A2A-Version header names
// the version, major.minor only. Method names name it too: slash names
// (message/send) are 0.3, PascalCase names (SendMessage) are 1.0, and they
// never overlap, so without a header the method name decides (agents take
// SendMessage without the header, so the meter must); a request whose
// header and method disagree is an invalid request. Over HTTP+JSON, where
// 0.3 and 1.0 share paths, a missing header means 0.3 (§3.6.2) unless the
// body says 1.0 (a message with role ROLE_…).
package wire
