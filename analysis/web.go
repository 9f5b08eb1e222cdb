package analysis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxBody bounds how much of a web response is read: a measurement is one
// number, not a download.
const maxBody = 4 << 20

// WebConfig is how the web provider reaches its servers; each
// measurement's URL says which.
type WebConfig struct {
	HTTP HTTPOptions
}

// Web measures by requesting a URL and picking one number out of the JSON
// it answers. It is safe for concurrent use.
type Web struct {
	client  *http.Client
	timeout time.Duration
}

// NewWeb returns a web provider.
func NewWeb(c WebConfig) (*Web, error) {
	hc, err := c.HTTP.client()
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	return &Web{client: hc, timeout: c.HTTP.timeout()}, nil
}

// Measure renders m's URL (and body) over t, requests it, and reads the
// number m's JSONPath picks from the response. now is the result's time;
// the request itself is made when Measure is called.
func (w *Web) Measure(ctx context.Context, m Measurement, t Target, now time.Time) Result {
	u, err := RenderQuery(m, t)
	if err != nil {
		return failed(m, "", now, err)
	}
	v, err := w.get(ctx, m, t, u)
	if err != nil {
		return failed(m, u, now, fmt.Errorf("measurement %q: %s %s: %w", m.Name, method(m), u, err))
	}
	return Result{Name: m.Name, Query: u, Value: v, Taken: now}
}

func method(m Measurement) string {
	if m.Web.Method == "" {
		return http.MethodGet
	}
	return m.Web.Method
}

func (w *Web) get(ctx context.Context, m Measurement, t Target, rawURL string) (float64, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return 0, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return 0, errors.New("want an http(s)://host/... URL")
	}
	var body io.Reader
	if m.Web.Body != "" {
		b, err := renderBody(m, t)
		if err != nil {
			return 0, err
		}
		body = strings.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method(m), u.String(), body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range m.Web.Headers {
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		if timedOut(ctx, err) {
			return 0, fmt.Errorf("timed out after %s: %w", w.timeout, err)
		}
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, fmt.Errorf("HTTP %d: reading the body: %w", resp.StatusCode, err)
	}
	if len(data) > maxBody {
		return 0, fmt.Errorf("HTTP %d: the body is over %d bytes", resp.StatusCode, maxBody)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, fmt.Errorf("HTTP %s: %s", resp.Status, excerpt(data))
	}
	return extractNumber(data, m.Web.JSONPath)
}
