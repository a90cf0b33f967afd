// Package sqlstore is a store.Store on SQLite, through database/sql and the
// pure-Go driver modernc.org/sqlite: the replicas of a service on one host
// share their Cooldowns' state in one database file.
//
//	db, err := sql.Open("sqlite", sqlstore.DSN("/var/lib/myservice/cooldown.db"))
//	...
//	st, err := sqlstore.New(ctx, db)
//	...
//	cd := retryhttp.NewCooldown(nil, retryhttp.WithStore(st))
//
// It is written from the store package's documentation alone, as an example
// of a Store over a backend with transactions.
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/url"
	"sync"
	"time"

	"github.com/retryhttp/retryhttp/store"
	"modernc.org/sqlite" // the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// DSN returns the data source name to open the database file at path with
// (sql.Open("sqlite", DSN(path))): BEGIN IMMEDIATE for every transaction, so
// that an Apply holds the write lock from its read to its write, WAL so that
// readers do not wait for a writer, synchronous NORMAL (safe with WAL), and no
// busy timeout: Apply tries the lock again itself, at a finer grain.
func DSN(path string) string {
	return path + "?" + url.Values{
		"_txlock":       {"immediate"},
		"_journal_mode": {"WAL"},
		"_busy_timeout": {"0"},
		"_synchronous":  {"NORMAL"},
	}.Encode()
}

const schema = `
CREATE TABLE IF NOT EXISTS retryhttp_keys (
	k   BLOB PRIMARY KEY NOT NULL, -- the key's bytes, any bytes
	rec BLOB NOT NULL,             -- the Record's encoding (or junk)
	exp INTEGER NOT NULL           -- Record.Expires, UnixMicro
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS retryhttp_keys_exp ON retryhttp_keys (exp);
CREATE TABLE IF NOT EXISTS retryhttp_news (
	id  INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, so a cursor never misses a row
	k   BLOB NOT NULL,
	now INTEGER NOT NULL, -- State.Now, UnixMicro
	rec BLOB NOT NULL,    -- State.Record
	res BLOB NOT NULL     -- State.Result, JSON
);`

// Store is a store.Store on a SQLite database. It is safe for concurrent
// use, and any number of Stores, in any number of processes on the host,
// may share one database file.
type Store struct {
	db   *sql.DB
	lock chan struct{} // the write lock among this Store's Applies
	// Bound is the longest an Apply takes: past it, it fails (and the
	// Cooldown goes on with what its process knows). 0: 100 ms.
	Bound time.Duration
	// Poll is how often a Listen reads the news. 0: 50 ms.
	Poll time.Duration
	// Keep is how long news stays for the Listens to read. 0: 10 s.
	// Set Bound, Poll and Keep before the Store is first used.
	Keep time.Duration
}

var _ store.Store = (*Store)(nil)

// New returns a Store on db, which should be opened with DSN, and creates
// its tables when they are missing.
func New(ctx context.Context, db *sql.DB) (*Store, error) {
	s := &Store{db: db, lock: make(chan struct{}, 1)}
	tx, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return nil, err
	}
	return s, tx.Commit()
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// maxEncoded bounds the bytes of a Record worth reading: longer is junk,
// read as NULL rather than fetched and decoded (megabytes of junk at a key
// would take most of a Bound). The largest Record in store's bounds (8
// lanes of 256-byte Rates) encodes in about 4 KB.
const maxEncoded = 64 << 10

type querier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

// Apply applies ops to key's Record in one IMMEDIATE transaction (the
// write lock is taken at BEGIN, so no other Apply of any key comes between
// the read and the write), as store.Apply does, and hands the State to
// every Listen when its Result has Publish set. With no ops it only reads.
func (s *Store) Apply(ctx context.Context, key string, ops []store.Op) (store.State, error) {
	ctx, cancel := context.WithTimeout(ctx, or(s.Bound, 100*time.Millisecond))
	defer cancel()
	k := []byte(key)     // a BLOB: a key of any bytes ("" is an empty BLOB, not NULL)
	var q querier = s.db // a read needs no lock: WAL gives it a snapshot
	var tx *sql.Tx
	if len(ops) > 0 {
		select { // queue in order here rather than poll SQLite's lock
		case s.lock <- struct{}{}:
			defer func() { <-s.lock }()
		case <-ctx.Done():
			return store.State{}, ctx.Err()
		}
		var err error
		if tx, err = s.begin(ctx); err != nil {
			return store.State{}, err
		}
		defer tx.Rollback()
		q = tx
	}
	// The Store's clock is this process's: every replica of one host reads
	// the same system clock, so they agree (store: "One clock"). It is read
	// once the write lock is held, so that Applies in order read times in
	// order. A Store across hosts would read the database server's clock.
	now := time.UnixMicro(time.Now().UnixMicro())
	var b []byte
	err := q.QueryRowContext(ctx, `SELECT CASE WHEN length(rec) <= ? THEN rec END
		FROM retryhttp_keys WHERE k = ? AND exp > ?`, maxEncoded, k, now.UnixMicro()).Scan(&b)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return store.State{}, err
	}
	var r store.Record
	if r.UnmarshalBinary(b) != nil || !r.Valid(now) {
		r = store.Record{} // junk, or nothing: the zero Record
	}
	st := store.State{Now: now}
	st.Result = store.Apply(&r, now, ops)
	st.Record = r // decoded for this call: shares nothing with the table
	if tx == nil {
		return st, nil
	}
	enc, _ := r.MarshalBinary()
	if _, err := tx.ExecContext(ctx, `REPLACE INTO retryhttp_keys (k, rec, exp) VALUES (?, ?, ?)`,
		k, enc, r.Expires(now).UnixMicro()); err != nil {
		return store.State{}, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM retryhttp_keys WHERE exp <= ?`, now.UnixMicro()); err != nil {
		return store.State{}, err
	}
	if st.Publish {
		res, _ := json.Marshal(st.Result)
		if _, err := tx.ExecContext(ctx, `INSERT INTO retryhttp_news (k, now, rec, res) VALUES (?, ?, ?, ?)`,
			k, now.UnixMicro(), enc, res); err != nil {
			return store.State{}, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM retryhttp_news WHERE now < ?`,
			now.Add(-or(s.Keep, 10*time.Second)).UnixMicro()); err != nil {
			return store.State{}, err
		}
	}
	return st, tx.Commit()
}

// begin begins an IMMEDIATE transaction, trying again every few hundred µs
// while another holds the write lock: SQLite's own busy handler sleeps up
// to 100 ms at a time, and would miss the lock's release by most of a
// Bound.
func (s *Store) begin(ctx context.Context) (*sql.Tx, error) {
	for {
		tx, err := s.db.BeginTx(ctx, nil)
		var e *sqlite.Error
		if !errors.As(err, &e) || e.Code()&0xff != sqlite3.SQLITE_BUSY {
			return tx, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(100+rand.IntN(400)) * time.Microsecond):
		}
	}
}

// Listen calls f with every State published after it is called, by an
// Apply of any Store on the database, until stop is called: it reads the
// news every Poll. It hears its own process's news too, which a Cooldown
// reads as nothing new; news older than Keep that it did not read in time
// is lost.
func (s *Store) Listen(f func(key string, st store.State)) (stop func()) {
	if f == nil {
		return func() {}
	}
	var last int64 // the cursor: the last id read (on an error, 0: what news there is)
	_ = s.db.QueryRow(`SELECT COALESCE(MAX(id), 0) FROM retryhttp_news`).Scan(&last)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(or(s.Poll, 50*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = s.read(&last, f, done) // on an error, again at the next tick
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

func (s *Store) read(last *int64, f func(string, store.State), done <-chan struct{}) error {
	rows, err := s.db.Query(`SELECT id, k, now, rec, res FROM retryhttp_news WHERE id > ? ORDER BY id`, *last)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k, rec, res []byte
		var now int64
		if err := rows.Scan(last, &k, &now, &rec, &res); err != nil {
			return err
		}
		st := store.State{Now: time.UnixMicro(now)}
		if st.Record.UnmarshalBinary(rec) != nil || json.Unmarshal(res, &st.Result) != nil {
			continue // not ours: skip it
		}
		select {
		case <-done:
			return nil
		default:
			f(string(k), st)
		}
	}
	return rows.Err()
}
