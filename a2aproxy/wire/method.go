package wire

import "strings"

// Version is an A2A protocol version, major.minor.
type Version string

const (
	V03 Version = "0.3"
	V10 Version = "1.0"
)

// supported is what VersionNotSupported names, oldest first.
const supported = "0.3, 1.0"

func (v Version) valid() bool { return v == V03 || v == V10 }

// ParseVersion reads the value of an A2A-Version header (or query
// parameter). Missing or empty means 0.3 (§3.6.2); only major.minor counts,
// so "1.0.1" is 1.0. Anything else is VersionNotSupported.
func ParseVersion(s string) (Version, *Error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return V03, nil
	}
	major, rest, ok := strings.Cut(s, ".")
	if !ok {
		return "", VersionNotSupported(s)
	}
	minor, patch, hasPatch := strings.Cut(rest, ".")
	if hasPatch && !digits(patch) {
		return "", VersionNotSupported(s)
	}
	switch {
	case major == "0" && minor == "3":
		return V03, nil
	case major == "1" && minor == "0":
		return V10, nil
	}
	return "", VersionNotSupported(s)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Method is an A2A operation, whatever the version names it.
type Method int

const (
	MethodSend Method = iota + 1
	MethodStream
	MethodGetTask
	MethodListTasks
	MethodCancelTask
	MethodSubscribe
	MethodPushSet
	MethodPushGet
	MethodPushList
	MethodPushDelete
	MethodExtendedCard
)

// methods holds, per Method, its stable label and its 0.3 and 1.0 names
// ("" where the version has no such method).
var methods = [...]struct{ label, v03, v10 string }{
	MethodSend:         {"send", "message/send", "SendMessage"},
	MethodStream:       {"stream", "message/stream", "SendStreamingMessage"},
	MethodGetTask:      {"get_task", "tasks/get", "GetTask"},
	MethodListTasks:    {"list_tasks", "", "ListTasks"},
	MethodCancelTask:   {"cancel_task", "tasks/cancel", "CancelTask"},
	MethodSubscribe:    {"subscribe", "tasks/resubscribe", "SubscribeToTask"},
	MethodPushSet:      {"push_set", "tasks/pushNotificationConfig/set", "CreateTaskPushNotificationConfig"},
	MethodPushGet:      {"push_get", "tasks/pushNotificationConfig/get", "GetTaskPushNotificationConfig"},
	MethodPushList:     {"push_list", "tasks/pushNotificationConfig/list", "ListTaskPushNotificationConfigs"},
	MethodPushDelete:   {"push_delete", "tasks/pushNotificationConfig/delete", "DeleteTaskPushNotificationConfig"},
	MethodExtendedCard: {"extended_card", "agent/getAuthenticatedExtendedCard", "GetExtendedAgentCard"},
}

func (m Method) valid() bool { return m >= MethodSend && m <= MethodExtendedCard }

// String is a version-neutral label ("send", "get_task", ...), stable for
// metrics and logs.
func (m Method) String() string {
	if !m.valid() {
		return "unknown"
	}
	return methods[m].label
}

// Streaming reports whether the method answers with an SSE stream.
func (m Method) Streaming() bool { return m == MethodStream || m == MethodSubscribe }

// Push reports whether m is one of the push-config methods.
func (m Method) Push() bool { return m >= MethodPushSet && m <= MethodPushDelete }

// TaskScoped reports whether the method operates on an existing task named
// in its params: get, cancel, subscribe and the push-config methods.
func (m Method) TaskScoped() bool {
	switch m {
	case MethodGetTask, MethodCancelTask, MethodSubscribe,
		MethodPushSet, MethodPushGet, MethodPushList, MethodPushDelete:
		return true
	}
	return false
}

// MethodName is the JSON-RPC method name of m in version v ("message/send",
// "SendMessage", ...), or "" when v has no such method (ListTasks in 0.3).
func MethodName(m Method, v Version) string {
	if !m.valid() {
		return ""
	}
	switch v {
	case V03:
		return methods[m].v03
	case V10:
		return methods[m].v10
	}
	return ""
}

// LookupMethod finds the method a JSON-RPC method name calls and the
// version the name belongs to.
func LookupMethod(name string) (Method, Version, bool) {
	for m := MethodSend; m <= MethodExtendedCard; m++ {
		switch name {
		case methods[m].v10:
			return m, V10, true
		case methods[m].v03:
			if name != "" {
				return m, V03, true
			}
		}
	}
	return 0, "", false
}
