// Package webtest drives the web UI in headless Chromium through chromedp,
// for the browser test (cmd/marketplace) and the screenshot tool
// (web/webtest/screenshots). It is not imported by the marketplace itself.
package webtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromePathEnv names the Chromium binary; scripts/test.sh sets it.
const ChromePathEnv = "AGENTMARKET_TEST_CHROME_PATH"

// ChromePath returns the Chromium to run: $AGENTMARKET_TEST_CHROME_PATH,
// else /usr/bin/chromium or chromium on the PATH; "" when there is none.
func ChromePath() string {
	for _, p := range []string{os.Getenv(ChromePathEnv), "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser starts headless Chromium at chromePath with a viewport of
// width×height and returns a chromedp context for one tab. The flags keep
// it off the network (the machine has none, and retries would slow it) and
// let it run as root. cancel stops the browser.
func Browser(parent context.Context, chromePath string, width, height int) (context.Context, context.CancelFunc, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromePath),
		chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(width, height),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	cancel := func() { cancelTab(); cancelAlloc() }
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("start %s: %w", chromePath, err)
	}
	return ctx, cancel, nil
}

// Screenshot saves what the window shows as a PNG at path, creating its
// directory.
func Screenshot(ctx context.Context, path string) error {
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}

// Fill types values into the inputs named by their CSS selectors, after
// clearing them.
func Fill(ctx context.Context, fields map[string]string) error {
	for sel, v := range fields {
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.SetValue(chromedp.CSS(sel), v)); err != nil {
			return fmt.Errorf("fill %s: %w", sel, err)
		}
	}
	return nil
}

// Submit clicks the button (or link) that matches sel and waits until the
// page that answers has loaded and has an element matching wait. The page
// shown before is marked first, so an element matching wait on it (the
// audit log's rows before a filter) is never taken for the answer's.
func Submit(ctx context.Context, sel, wait string) error {
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Evaluate[chromedp.Void](`window.amBefore = true`), chromedp.Click(chromedp.CSS(sel))); err != nil {
		return fmt.Errorf("submit %s: %w", sel, err)
	}
	if err := waitLoaded(ctx, "submit "+sel); err != nil {
		return err
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(wait))); err != nil {
		return fmt.Errorf("submit %s, wait for %s: %w", sel, wait, err)
	}
	return nil
}

// Open navigates to url and waits for the page's main element.
func Open(ctx context.Context, url string) error {
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main"))); err != nil {
		return fmt.Errorf("open %s: %w", url, err)
	}
	return nil
}

// Text returns the trimmed text of the first element matching sel.
func Text(ctx context.Context, sel string) (string, error) {
	s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.CSS(sel)))
	return strings.TrimSpace(s), err
}

// SignIn signs in with an e-mail and password through the sign-in form.
func SignIn(ctx context.Context, base, email, password string) error {
	if err := Open(ctx, base+"/signin"); err != nil {
		return err
	}
	if err := Fill(ctx, map[string]string{"#email": email, "#password": password}); err != nil {
		return err
	}
	return Submit(ctx, `form[action="/signin"] button[type=submit]`, `form[action="/signout"]`)
}

// SignInKey signs in with an API key (the operator's way in).
func SignInKey(ctx context.Context, base, key string) error {
	if err := Open(ctx, base+"/signin"); err != nil {
		return err
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("details summary"))); err != nil {
		return err
	}
	if err := Fill(ctx, map[string]string{"#api_key": key}); err != nil {
		return err
	}
	return Submit(ctx, `form[action="/signin/key"] button[type=submit]`, `form[action="/signout"]`)
}

// SignOut signs out, if signed in.
func SignOut(ctx context.Context, base string) error {
	if err := Open(ctx, base+"/"); err != nil {
		return err
	}
	ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.querySelector('form[action="/signout"]')`))
	if err != nil || !ok {
		return err
	}
	return Submit(ctx, `form[action="/signout"] button`, `a[href="/signin"]`)
}

// Page is what a crawl reads of the page a tab shows.
type Page struct {
	URL    string
	Status int // the HTTP status the page came with
	// ErrorTitle is the heading of the console's error page ("That did
	// not work", "Something went wrong", "Not found"…) when the page is
	// one, else "".
	ErrorTitle string
	Message    string // the error page's message
	// Text is what the page's main part shows a reader or reads aloud:
	// its text (what screen readers alone get too), less what it shows
	// as code (code, pre, kbd, samp: ids, endpoints, the raw records an
	// audit entry holds) and what fields hold (the values of inputs and
	// text areas).
	Text  string
	Links []Link
	Forms []Form
}

// Link is a link of a page to the same site.
type Link struct {
	URL      string
	Download bool // a file to save (download attribute, .csv, .json)
}

// Form is one submit button of one form of a page, as a user would press
// it: Key finds it again on a fresh load of the page.
type Form struct {
	Key    string // the action, the button's label and the hidden inputs but the CSRF token
	Action string
	Method string
	Label  string
	// Ready is whether the form may be sent as the page offers it: the
	// browser's own checks pass with the values the page filled in.
	Ready bool
}

const readPageJS = `(() => {
  const nav = performance.getEntriesByType('navigation')[0] || {};
  const err = !!document.querySelector('main [data-error-page]');
  const links = [...document.querySelectorAll('a[href]')].filter(a => a.href.startsWith(location.origin + '/')).map(a => {
    const u = new URL(a.href); u.hash = '';
    return {url: u.href, download: a.hasAttribute('download') || /\.(csv|json)$/.test(u.pathname)};
  });
  const forms = [];
  for (const f of document.forms) for (const b of f.querySelectorAll('button:not([type]), button[type=submit], input[type=submit]')) {
    if (b.disabled) continue;
    forms.push({key: amFormKey(f, b), action: amAction(f), method: (f.getAttribute('method') || 'get').toLowerCase(), label: amLabel(b), ready: f.checkValidity()});
  }
  const main = document.querySelector('main');
  let text = '';
  if (main) {
    const copy = main.cloneNode(true);
    copy.querySelectorAll('code, pre, kbd, samp, textarea, script, style, [hidden], details:not([open]) > :not(summary)').forEach(e => {
      // What is hidden from the eye but read aloud counts: keep it, in words.
      if (e.matches('.visually-hidden')) return;
      e.remove();
    });
    copy.querySelectorAll('.visually-hidden').forEach(e => { e.className = ''; });
    document.body.appendChild(copy); // innerText needs the layout
    copy.style.position = 'absolute'; copy.style.left = '-99999px';
    text = copy.innerText;
    copy.remove();
  }
  return {url: location.href, status: nav.responseStatus || 0, errorTitle: err ? document.querySelector('main [data-error-page] h1').textContent.trim() : '',
    message: err ? (document.querySelector('main [data-error-page] p') || {}).textContent || '' : '', text, links, forms};
})()`

// formKeyJS defines the functions that name a form's button.
//
// A form's action is read from its attribute: f.action is the form's field
// named "action" when it has one (the audit log's filter does).
const formKeyJS = `window.amLabel = b => (b.getAttribute('aria-label') || b.textContent || b.value || '').trim();
window.amAction = f => new URL(f.getAttribute('action') || '', location.href).href;
window.amFormKey = (f, b) => amAction(f) + ' | ' + amLabel(b) + ' | ' +
  [...f.querySelectorAll('input[type=hidden]')].filter(i => i.name !== 'csrf').map(i => i.name + '=' + i.value).join('&');`

// ReadPage reads the page the tab shows.
func ReadPage(ctx context.Context) (Page, error) {
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](formKeyJS)); err != nil {
		return Page{}, fmt.Errorf("read the page: %w", err)
	}
	p, err := chromedp.Run(ctx, chromedp.Evaluate[Page](readPageJS))
	if err != nil {
		return p, fmt.Errorf("read the page: %w", err)
	}
	return p, nil
}

// Load navigates to url and waits until the page has loaded.
func Load(ctx context.Context, url string) error {
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("open %s: %w", url, err)
	}
	return waitLoaded(ctx, url)
}

func waitLoaded(ctx context.Context, what string) error {
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(30 * time.Millisecond) {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!window.amBefore && document.readyState === "complete"`))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no page loaded within 20s (%v)", what, err)
		}
	}
}

// FetchStatus fetches url from the page the tab shows, with its cookies,
// as a download would, and returns the HTTP status.
func FetchStatus(ctx context.Context, url string) (int, error) {
	return chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {credentials: 'same-origin'}).then(r => r.status)`, url), chromedp.EvalAwaitPromise))
}

// Press presses the button f names on the page the tab shows (the
// browser's own form checks off, as a user's old browser or a script
// would send it) and waits for the page that answers. found is false when
// the page no longer offers it.
//
// A form the page offers ready to send (Form.Ready) is sent as a user
// would, with the browser's checks on.
func Press(ctx context.Context, f Form) (found bool, err error) {
	js := fmt.Sprintf(`(() => {
  for (const f of document.forms) for (const b of f.querySelectorAll('button:not([type]), button[type=submit], input[type=submit]')) {
    if (!b.disabled && amFormKey(f, b) === %q) { f.noValidate = %t; window.amBefore = true; b.click(); return true; }
  }
  return false;
})()`, f.Key, !f.Ready)
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](formKeyJS)); err != nil {
		return false, err
	}
	if found, err = chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil || !found {
		return found, err
	}
	return true, waitLoaded(ctx, "press "+f.Label)
}
