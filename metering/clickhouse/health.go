package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	ch "github.com/ClickHouse/clickhouse-go/v2"

	"github.com/agentmarket/agentmarket"
)

// CheckDSN reports whether dsn is a ClickHouse URL Open can use, without
// connecting: for configuration checks at start. Its message never holds
// the DSN (which may hold a password).
func CheckDSN(dsn string) error {
	opts, err := ch.ParseDSN(dsn)
	if err != nil {
		return agentmarket.Errorf(agentmarket.Invalid, "invalid_clickhouse_url", "the ClickHouse URL is not valid: %s", safeDSNError(err))
	}
	if opts.Protocol != ch.Native {
		return agentmarket.Errorf(agentmarket.Invalid, "invalid_clickhouse_url", "the ClickHouse URL must use the native protocol (clickhouse://host:9000/db)")
	}
	return nil
}

// safeDSNError is a DSN parse error without the DSN, which may hold a
// password.
func safeDSNError(err error) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err.Error()
	}
	return err.Error()
}

// Describe names the server dsn points at for people: host and database,
// never the user or password.
func Describe(dsn string) string {
	opts, err := ch.ParseDSN(dsn)
	if err != nil || len(opts.Addr) == 0 {
		return "ClickHouse"
	}
	return fmt.Sprintf("ClickHouse at %s/%s", opts.Addr[0], opts.Auth.Database)
}

// Ping asks the server for its version: it answers, and which one.
func (s *Store) Ping(ctx context.Context) (string, error) {
	var v string
	if err := s.conn.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return "", unavailable(err)
	}
	return "ClickHouse " + v, nil
}

// exceptionNames names the server's error codes an operator most likely
// meets when the store cannot work (ClickHouse's ErrorCodes.cpp).
var exceptionNames = map[int32]string{
	60:  "UNKNOWN_TABLE",
	81:  "UNKNOWN_DATABASE",
	159: "TIMEOUT_EXCEEDED",
	164: "READONLY",
	192: "UNKNOWN_USER",
	193: "WRONG_PASSWORD",
	194: "REQUIRED_PASSWORD",
	202: "TOO_MANY_SIMULTANEOUS_QUERIES",
	241: "MEMORY_LIMIT_EXCEEDED",
	242: "TABLE_IS_READ_ONLY",
	252: "TOO_MANY_PARTS",
	497: "ACCESS_DENIED",
	516: "AUTHENTICATION_FAILED",
}

// cause names why a call to the server failed, in words safe to show any
// caller: the network failure, or the server's error code (its message
// may name tables, users or queries, and is only logged).
func cause(err error) string {
	var ex *ch.Exception
	if errors.As(err, &ex) {
		if name, ok := exceptionNames[ex.Code]; ok {
			return fmt.Sprintf("ClickHouse error %d (%s)", ex.Code, name)
		}
		return fmt.Sprintf("ClickHouse error %d", ex.Code)
	}
	return agentmarket.Cause(err)
}
