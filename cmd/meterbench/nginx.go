package main

import (
	"fmt"
	"io"
	"strings"
)

// The loopback ports of the nginx configuration -nginx-conf writes.
const (
	nginxAgentAddr = "127.0.0.1:18080"
	nginxProxyAddr = "127.0.0.1:18081"
)

// writeNginxConf writes an nginx configuration with two servers: the
// canned agent (the same card and the same answer as the built-in agent,
// with nginx's $request_id as the task id) on nginxAgentAddr, and
// proxy_pass to it, with upstream keep-alive, on nginxProxyAddr. Run it
// with nginx -p DIR -c DIR/nginx.conf; pid and error log go in DIR.
func writeNginxConf(w io.Writer) error {
	answer := string(sendAnswer[0]) + "$request_id" + string(sendAnswer[1])
	card := string(agentCard("http://" + nginxAgentAddr + "/"))
	for _, s := range []string{answer, card} {
		if strings.ContainsAny(s, "'\\") {
			return fmt.Errorf("the canned answer cannot be quoted for nginx")
		}
	}
	_, err := fmt.Fprintf(w, `# Written by meterbench -nginx-conf: the canned agent and nginx proxy_pass
# to it, for the nginx comparison in BENCHMARKS.md.
worker_processes auto;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    default_type application/json;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    upstream canned_agent {
        server %[1]s;
        keepalive 256;
    }
    server {
        listen %[1]s;
        location = /.well-known/agent-card.json { return 200 '%[3]s'; }
        location / { return 200 '%[4]s'; }
    }
    server {
        listen %[2]s;
        location / {
            proxy_pass http://canned_agent;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
`, nginxAgentAddr, nginxProxyAddr, card, answer)
	return err
}
