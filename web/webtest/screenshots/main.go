// Command screenshots saves pictures of the web UI's main pages for the
// docs (scripts/screenshots.sh runs it against a `--demo` marketplace):
// the catalog, a listing, the seller and buyer consoles, finance and the
// operator's review page.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentmarket/agentmarket/web/webtest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
		os.Exit(1)
	}
}

func run() error {
	base := flag.String("base", "http://127.0.0.1:8080", "the marketplace's base URL")
	out := flag.String("out", "docs/screenshots", "where the PNGs go")
	seller := flag.String("seller", "seller@demo.agentmarket.local", "the seller's e-mail")
	buyer := flag.String("buyer", "buyer@demo.agentmarket.local", "the buyer's e-mail")
	password := flag.String("password", "demo-password-not-secret", "both users' password")
	operatorKeyFile := flag.String("operator-key-file", "", "file with the operator's API key")
	width := flag.Int("width", 1280, "window width")
	height := flag.Int("height", 900, "window height")
	flag.Parse()

	chrome := webtest.ChromePath()
	if chrome == "" {
		return fmt.Errorf("no Chromium found: apt-get install -y chromium, or set %s", webtest.ChromePathEnv)
	}
	opKey := ""
	if *operatorKeyFile != "" {
		b, err := os.ReadFile(*operatorKeyFile)
		if err != nil {
			return err
		}
		opKey = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ctx, stop, err := webtest.Browser(ctx, chrome, *width, *height)
	if err != nil {
		return err
	}
	defer stop()

	shot := func(name string) error {
		p := filepath.Join(*out, name+".png")
		if err := webtest.Screenshot(ctx, p); err != nil {
			return err
		}
		fmt.Println("saved", p)
		return nil
	}
	steps := []struct {
		name string
		do   func() error
	}{
		{"catalog", func() error { return webtest.Open(ctx, *base+"/") }},
		{"listing", func() error {
			href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('.card h3 a').getAttribute('href')`))
			if err != nil {
				return err
			}
			return webtest.Open(ctx, *base+href)
		}},
		{"seller", func() error {
			if err := webtest.SignIn(ctx, *base, *seller, *password); err != nil {
				return err
			}
			return webtest.Open(ctx, *base+"/seller")
		}},
		{"buyer", func() error {
			if err := webtest.SignOut(ctx, *base); err != nil {
				return err
			}
			if err := webtest.SignIn(ctx, *base, *buyer, *password); err != nil {
				return err
			}
			if err := webtest.Open(ctx, *base+"/buyer"); err != nil {
				return err
			}
			// Show the first subscription's orchestrator configuration.
			_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(function(){var d=document.querySelector('details.config'); if(d){d.open=true} return true})()`))
			return err
		}},
		{"finance", func() error { return webtest.Open(ctx, *base+"/finance") }},
		{"operator", func() error {
			if opKey == "" {
				return fmt.Errorf("no operator key (-operator-key-file)")
			}
			if err := webtest.SignOut(ctx, *base); err != nil {
				return err
			}
			if err := webtest.SignInKey(ctx, *base, opKey); err != nil {
				return err
			}
			return webtest.Open(ctx, *base+"/operator?status=published")
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if err := shot(s.name); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}
