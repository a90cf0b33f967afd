package bench

// Tests of the harness itself: each library is set up as the tables say
// (2 retries, the right statuses retried) and each scenario counts what it
// claims to. They assert behaviour, never time.

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestLibsRetryOnce(t *testing.T) {
	for _, lib := range []Lib{Bare, RetryHTTP, RetryHTTPQuota, Retryablehttp, Failsafe, FailsafeNoJitter, FailsafeBudget} {
		t.Run(lib.Name, func(t *testing.T) {
			base := &flaky{fail: response(http.StatusServiceUnavailable), ok: response(http.StatusOK)}
			req, err := http.NewRequest(http.MethodGet, apiURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := lib.Wrap(base, Zero).RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want, wantTries := http.StatusOK, 2
			if !lib.Retries {
				want, wantTries = http.StatusServiceUnavailable, 1
			}
			if resp.StatusCode != want || base.n != wantTries {
				t.Errorf("got status %d after %d tries, want %d after %d", resp.StatusCode, base.n, want, wantTries)
			}
		})
	}
}

func TestLibByName(t *testing.T) {
	for _, lib := range Compared() {
		if got, ok := LibByName(lib.Name); !ok || got.Name != lib.Name {
			t.Errorf("LibByName(%q) = %q, %v", lib.Name, got.Name, ok)
		}
	}
	if _, ok := LibByName("nope"); ok {
		t.Error(`LibByName("nope") found a library`)
	}
}

func TestOutageCountsEveryTry(t *testing.T) {
	for _, tc := range []struct {
		lib       Lib
		wantTries int64 // exactly, or at most with a quota or budget
		exact     bool
	}{
		{Bare, 8, true},
		{RetryHTTP, 24, true},
		{Retryablehttp, 24, true},
		{Failsafe, 24, true},
		{RetryHTTPQuota, 24, false},
	} {
		t.Run(tc.lib.Name, func(t *testing.T) {
			r := Outage(tc.lib, 2, 4)
			if r.Calls != 8 || r.Errors+r.Responses != 8 {
				t.Errorf("calls %d, errors %d + responses %d, want 8 in all", r.Calls, r.Errors, r.Responses)
			}
			if tc.exact && r.Tries != tc.wantTries || !tc.exact && (r.Tries > tc.wantTries || r.Tries < 8) {
				t.Errorf("server saw %d tries, want %d (exact %v)", r.Tries, tc.wantTries, tc.exact)
			}
		})
	}
}

func TestPostResendsTheWholeBody(t *testing.T) {
	const size = 1 << 20
	for _, lib := range Compared() {
		t.Run(lib.Name, func(t *testing.T) {
			r, err := Post(lib, size)
			if err != nil {
				t.Fatal(err)
			}
			wantTries, wantStatus := 2, http.StatusOK
			if !lib.Retries {
				wantTries, wantStatus = 1, http.StatusServiceUnavailable
			}
			if r.TriesSeen != wantTries || r.Status != wantStatus || r.Err != "" {
				t.Fatalf("tries %d, status %d, err %q; want %d tries ending %d", r.TriesSeen, r.Status, r.Err, wantTries, wantStatus)
			}
			for i, n := range r.BytesSeen {
				if n != size {
					t.Errorf("try %d sent %d body bytes, want %d", i+1, n, size)
				}
			}
			if r.Samples < 1 {
				t.Errorf("no heap samples")
			}
		})
	}
}

func TestFirstWaitOfRetryHTTPHonoursEveryForm(t *testing.T) {
	now := time.Now()
	for _, f := range RetryAfterForms(now) {
		got, honoured := FirstWait(RetryHTTP, f.Header, now)
		if !honoured || got != f.Want {
			t.Errorf("%s: wait %v honoured %v, want %v honoured", f.Name, got, honoured, f.Want)
		}
	}
}

func TestRetryAfterEndsEveryCallAfterTwoTries(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 2 s of real time")
	}
	for _, r := range RetryAfter([]Lib{RetryHTTP, Retryablehttp, Failsafe}, 1) {
		if len(r.Failures) > 0 || len(r.Gaps) != 1 {
			t.Errorf("%s, %d: %d retries, failures %q", r.Lib, r.Status, len(r.Gaps), r.Failures)
		}
	}
}

func TestHappyStubReturnsTheResponse(t *testing.T) {
	deadline, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, lib := range Compared() {
		req, _ := http.NewRequestWithContext(deadline, http.MethodGet, apiURL, nil)
		resp, err := lib.Wrap(newStub(http.StatusOK), Shaped).RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v, %v", lib.Name, resp, err)
		}
		resp.Body.Close()
	}
}
