package sqlstore_test

import (
	"context"
	"database/sql"
	"log"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/retryhttp/retryhttp"
	"github.com/retryhttp/retryhttp/examples/sqlstore"
	"github.com/retryhttp/retryhttp/store"
	"github.com/retryhttp/retryhttp/store/storetest"
)

func open(t *testing.T, path string) (*sql.DB, *sqlstore.Store) {
	t.Helper()
	db, err := sql.Open("sqlite", sqlstore.DSN(path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := sqlstore.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	s.Bound = bound
	return db, s
}

// TestStore runs the conformance kit on one database file. Every Open is a
// *sql.DB of its own on the file, as each replica of a host has, so Listen
// hears what another handle published.
func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cooldown.db")
	planter, _ := open(t, path)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			_, s := open(t, path)
			return s
		},
		// Plant writes b as a key's bytes, never expiring, so that the
		// Store must read it as junk rather than skip it as expired.
		Plant: func(t *testing.T, key string, b []byte) {
			if b == nil {
				b = []byte{}
			}
			if _, err := planter.Exec(`REPLACE INTO retryhttp_keys (k, rec, exp) VALUES (?, ?, ?)`,
				[]byte(key), b, int64(math.MaxInt64)); err != nil {
				t.Fatal(err)
			}
		},
		Parallel: 4,
	})
}

// TestKeys checks what the kit may not: the empty key, a key of a NUL, and
// an expired key read as nothing.
func TestKeys(t *testing.T) {
	ctx := context.Background()
	db, s := open(t, filepath.Join(t.TempDir(), "cooldown.db"))
	hold := []store.Op{{Kind: store.OpHold, For: time.Minute}}
	for _, key := range []string{"", "\x00", "\x00\x00", "\xff"} {
		if _, err := s.Apply(ctx, key, hold); err != nil {
			t.Fatalf("%q: %v", key, err)
		}
	}
	for _, key := range []string{"", "\x00", "\x00\x00", "\xff"} {
		st, err := s.Apply(ctx, key, nil)
		if err != nil || st.Lane(store.Requests).Until.IsZero() {
			t.Errorf("%q: the hold is lost: %+v, %v", key, st.Record, err)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM retryhttp_keys`).Scan(&n); err != nil || n != 4 {
		t.Errorf("%d keys, want 4 (%v)", n, err)
	}
	// A key past its Expires is nothing, and goes at the next write.
	if _, err := db.Exec(`UPDATE retryhttp_keys SET exp = ? WHERE k = ?`, time.Now().UnixMicro(), []byte("")); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Apply(ctx, "", nil); err != nil || st.Seq != 0 {
		t.Errorf("an expired key reads %+v, %v; want the zero Record", st.Record, err)
	}
	if _, err := s.Apply(ctx, "\xff", hold); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM retryhttp_keys`).Scan(&n); err != nil || n != 3 {
		t.Errorf("%d keys, want 3 (%v)", n, err)
	}
}

// ExampleNew shares a Cooldown's state through a database file.
func ExampleNew() {
	db, err := sql.Open("sqlite", sqlstore.DSN(filepath.Join(os.TempDir(), "cooldown.db")))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	st, err := sqlstore.New(context.Background(), db)
	if err != nil {
		log.Fatal(err)
	}
	cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(st))
	defer cd.Close()
	_ = retryhttp.WithCooldown(cd) // on each Transport of the process
}
