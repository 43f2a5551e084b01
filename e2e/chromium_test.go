package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
)

// The console's browser tests (console_browser_test.go,
// console_trends_test.go, console_deliveries_test.go) drive headless
// Chromium through chromedp; this is their one set-up.

// chromium is the path of Debian's chromium, or skips the test when it is
// not installed. Call it first, before the test starts anything.
func chromium(t *testing.T) string {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("headless Chromium is not installed (apt-get install chromium): " + err.Error())
	}
	return browser
}

// startChromium starts the browser at path, headless with chromedp's
// default options, no sandbox, a window of width×height and the extra
// options, and opens a tab. It returns the tab's context and the function
// that closes the tab and then stops the browser; ctx bounds both.
func startChromium(ctx context.Context, path string, width, height int, extra ...chromedp.ExecAllocatorOption) (context.Context, context.CancelFunc) {
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.WindowSize(width, height))
	actx, acancel := chromedp.NewExecAllocator(ctx, append(opts, extra...)...)
	bctx, bcancel := chromedp.NewContext(actx)
	return bctx, func() {
		bcancel()
		acancel()
	}
}

// screenshotter returns the function that saves a full-page PNG of the
// tab bctx under name: in docs/ with UPDATE_SCREENSHOTS=1 (the pictures
// the docs show), else in a temporary directory.
func screenshotter(t *testing.T, bctx context.Context) func(name string) {
	dir := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		dir = "../docs"
	}
	return func(name string) {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// mainText is the text of the tab's <main>.
func mainText(t *testing.T, bctx context.Context) string {
	t.Helper()
	text, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil {
		t.Fatal(err)
	}
	return text
}
