package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The loopback ports of the nginx configuration -nginx-conf prints (a run
// picks free ports instead).
const (
	nginxAgentAddr = "127.0.0.1:18080"
	nginxProxyAddr = "127.0.0.1:18081"
)

// writeNginxConf writes an nginx configuration with two servers: the
// canned agent on agentAddr (the same cards and answers as the built-in
// agent, 0.3 under /v03/ and 1.0 under /v10/, with nginx's $request_id as
// the task id so every call creates a new task), and proxy_pass to it,
// with upstream keep-alive, on proxyAddr. Relative paths (pid, logs,
// temporary files) are under nginx's prefix (-p DIR).
func writeNginxConf(w io.Writer, agentAddr, proxyAddr string) error {
	quoted := map[string]string{}
	for _, v := range []protocol{v03, v10} {
		answer := sendAnswers[v]
		quoted["answer"+string(v)] = string(answer[0]) + "$request_id" + string(answer[1])
		quoted["card"+string(v)] = string(agentCard("http://"+agentAddr+v.path(), v, false))
	}
	for _, s := range quoted {
		// Inside '…' nginx reads \ as an escape and $ as a variable.
		if strings.ContainsAny(s, "'\\") || strings.Count(s, "$") > strings.Count(s, "$request_id") {
			return fmt.Errorf("the canned answer cannot be quoted for nginx")
		}
	}
	_, err := fmt.Fprintf(w, `# Written by meterbench: the canned agent (A2A 0.3 under /v03/, 1.0 under
# /v10/) and nginx proxy_pass to it. Run: nginx -p DIR -c DIR/nginx.conf
worker_processes auto;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path client_body;
    proxy_temp_path proxy_temp;
    default_type application/json;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    upstream canned_agent {
        server %[1]s;
        keepalive 256;
    }
    server {
        listen %[1]s;
        location = /v03/.well-known/agent-card.json { return 200 '%[3]s'; }
        location = /v10/.well-known/agent-card.json { return 200 '%[4]s'; }
        location /v03/ { return 200 '%[5]s'; }
        location /v10/ { return 200 '%[6]s'; }
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
`, agentAddr, proxyAddr, quoted["card0.3"], quoted["card1.0"], quoted["answer0.3"], quoted["answer1.0"])
	return err
}

// nginxPeer is nginx serving the canned agent and proxy_pass to it.
type nginxPeer struct {
	agent string // the canned agent's base URL, ending in /
	proxy string // proxy_pass's base URL, ending in /
	proc  *peerProc
}

// startNginx writes a configuration with free loopback ports into a
// directory under dir and runs nginx (bin) on it in the foreground, as a
// child of this process, until stop.
func startNginx(ctx context.Context, bin, dir string) (*nginxPeer, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	prefix := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(prefix, "nginx.conf")
	f, err := os.Create(conf)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(writeNginxConf(f, ports[0], ports[1]), f.Close()); err != nil {
		return nil, fmt.Errorf("write %s: %w", conf, err)
	}
	n := &nginxPeer{agent: "http://" + ports[0] + "/", proxy: "http://" + ports[1] + "/"}
	// -e: the error log from the start, before the configuration is read
	// (else nginx tries the system's log). -g: in the foreground, so
	// that this process owns it and stops it.
	n.proc, err = startPeer(ctx, "nginx", bin, prefix,
		"-p", prefix+"/", "-c", conf, "-e", filepath.Join(prefix, "error.log"), "-g", "daemon off;")
	if err != nil {
		return nil, err
	}
	for _, u := range []string{n.agent + "v03/.well-known/agent-card.json", n.proxy + "v10/.well-known/agent-card.json"} {
		if err := n.proc.waitReady(ctx, u); err != nil {
			n.proc.stop()
			return nil, fmt.Errorf("%w%s", err, n.proc.lastOutput(filepath.Join(prefix, "error.log")))
		}
	}
	return n, nil
}
