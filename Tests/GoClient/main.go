// quaked-go-client: an independent Varlink client for io.quaked, built on the bindings that
// Debian's varlink-go-interface-generator makes from Sources/QuakeProtocol/io.quaked.varlink
// (Tests/GoClient/build.sh). It calls every method of io.quaked and org.varlink.service's
// GetInfo and GetInterfaceDescription, decodes every reply with the generated types, checks
// each reply as sent against the interface (wire.go), and prints one JSON line:
//
//	{"calls":N,"ok":[...],"errors":[...],"skipped":[...],"seen":{...}}
//
// "ok" names each method that behaved (Get:NoSuchQuake for the expected error, Delete and
// Reload with :PermissionDenied when the caller is not an administrator); "seen" counts what
// the store held (quakes, transactions, changes by kind, FieldValue members), for a test to
// check that the interesting cases were exercised. Exit status: 0 when no error, 1 when a
// reply did not decode or an unexpected error came, 64 for bad usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/varlink/go/varlink"
	"github.com/varlink/go/varlink/idl"

	"quaked/ioquaked"
)

const (
	permissionDenied = "org.varlink.service.PermissionDenied"
	unknownID        = "quaked-go-client-no-such-quake"
)

type summary struct {
	Calls   int      `json:"calls"`
	OK      []string `json:"ok"`
	Errors  []string `json:"errors"`
	Skipped []string `json:"skipped"`
	Seen    seen     `json:"seen"`
}

type seen struct {
	Quakes        int            `json:"quakes"`
	SnapshotPages int            `json:"snapshotPages"`
	Transactions  int            `json:"transactions"`
	HistoryPages  int            `json:"historyPages"`
	Changes       map[string]int `json:"changes"`
	Authors       map[string]int `json:"authors"`
	Reasons       map[string]int `json:"reasons"`
	FieldValues   map[string]int `json:"fieldValues"`
}

type options struct {
	socket     string
	feed       string
	clientName string
	pageSize   int64
	limit      int64
	maxChanges int64
	timeout    time.Duration
}

type link struct {
	conn *varlink.Connection
	rec  *recorder
}

type client struct {
	opt     options
	proxy   *proxy
	quaked  *schema
	service *schema
	shared  *link
	sum     summary
}

func main() {
	var opt options
	flag.StringVar(&opt.socket, "socket", "", "path of quaked's Unix socket (required)")
	flag.StringVar(&opt.feed, "feed", "", "the feed Refresh pulls (default: every feed)")
	flag.StringVar(&opt.clientName, "client", "quaked-go-client", "durable client name for Subscribe, FetchHistory and Acknowledge")
	flag.Int64Var(&opt.pageSize, "page-size", 100, "Snapshot pageSize")
	flag.Int64Var(&opt.limit, "limit", 100, "FetchHistory limit")
	flag.Int64Var(&opt.maxChanges, "max-changes", 10000, "FetchHistory maxChanges")
	flag.DurationVar(&opt.timeout, "timeout", 2*time.Minute, "time each call may take")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s --socket PATH [--feed NAME] [--client NAME] [--page-size N] [--limit N] [--max-changes N] [--timeout D]\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if opt.socket == "" || flag.NArg() > 0 || opt.pageSize < 1 || opt.limit < 1 || opt.maxChanges < 1 {
		flag.Usage()
		os.Exit(64)
	}

	c := &client{opt: opt}
	c.sum.OK, c.sum.Errors, c.sum.Skipped = []string{}, []string{}, []string{}
	c.sum.Seen = seen{Changes: map[string]int{}, Authors: map[string]int{}, Reasons: map[string]int{}, FieldValues: map[string]int{}}
	c.run()

	out, _ := json.Marshal(c.sum)
	fmt.Println(string(out))
	if len(c.sum.Errors) > 0 {
		os.Exit(1)
	}
}

func (c *client) run() {
	var err error
	// The interface this client was built from, as the generator embedded it.
	builtFrom := ioquaked.VarlinkNew(nil).VarlinkGetDescription()
	if c.quaked, err = newSchema(builtFrom); err != nil {
		c.fail("io.quaked", "the Go varlink parser rejects the interface: %v", err)
		return
	}
	if c.service, err = newSchema(orgVarlinkService); err != nil {
		c.fail("org.varlink.service", "%v", err)
		return
	}
	if c.proxy, err = newProxy(c.opt.socket); err != nil {
		c.fail("connect", "%v", err)
		return
	}
	defer c.proxy.close()
	if _, err := c.link(); err != nil {
		c.fail("connect", "%v", err)
		return
	}
	defer func() {
		if c.shared != nil {
			c.shared.conn.Close()
		}
	}()

	c.getInfo()
	c.getInterfaceDescription(builtFrom)
	storeID, ok := c.getStatus()
	if !ok {
		return
	}
	c.subscribe(storeID)
	c.refresh()
	last := c.fetchHistory(storeID)
	c.acknowledge(last)
	quakes := c.snapshot(storeID)
	c.query(quakes)
	c.get(quakes)
	c.getUnknown()
	c.getReports(quakes)
	c.deleteUnknown()
	c.reload()
	c.metrics()
	c.backfill()
}

// --- plumbing ---

func (c *client) fail(label, format string, args ...interface{}) {
	msg := label + ": " + fmt.Sprintf(format, args...)
	c.sum.Errors = append(c.sum.Errors, msg)
	fmt.Fprintln(os.Stderr, "quaked-go-client: "+msg)
}

func (c *client) ok(label string) { c.sum.OK = append(c.sum.OK, label) }

func (c *client) context() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), c.opt.timeout)
}

// open makes a new connection to quaked (through the recording proxy).
func (c *client) open() (*link, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := varlink.NewConnection(ctx, "unix:"+c.proxy.path)
	if err != nil {
		return nil, err
	}
	rec, err := c.proxy.next()
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &link{conn: conn, rec: rec}, nil
}

// link is the connection the calls without "more" share, one after the other (opened again
// after a call that broke it).
func (c *client) link() (*link, error) {
	if c.shared == nil {
		l, err := c.open()
		if err != nil {
			return nil, err
		}
		c.shared = l
	}
	return c.shared, nil
}

// reply checks the one message a call got: that it is the method's reply or an error, valid
// against the interface, and that the bindings saw the same (callErr set exactly for errors).
// An error reply is fine only when its name is in allowed; its name is returned. ok is false
// when the call failed (reported already).
func (c *client) reply(label, method string, l *link, callErr error, more bool, allowed ...string) (f frame, errName string, ok bool) {
	// After a broken exchange the shared connection is out of step: the next call opens another.
	drop := func() {
		if l == c.shared {
			l.conn.Close()
			c.shared = nil
		}
	}
	raw, got := l.rec.next()
	if !got {
		c.fail(label, "no reply: %v", callErr)
		drop()
		return frame{}, "", false
	}
	if !more && l.rec.pending() > 0 {
		c.fail(label, "more than one reply to a call without more")
		drop()
		return frame{}, "", false
	}
	f, err := parseFrame(raw)
	if err != nil {
		c.fail(label, "%v", err)
		return f, "", false
	}
	if f.continues && !more {
		c.fail(label, "continues set in the reply to a call without more")
		return f, "", false
	}
	if f.err != "" {
		s := c.quaked
		if strings.HasPrefix(f.err, "org.varlink.service.") {
			s = c.service
		}
		t := s.errorType(f.err)
		if t == nil {
			c.fail(label, "error %s is declared by neither io.quaked nor org.varlink.service (%s)", f.err, f.params)
			return f, f.err, false
		}
		if err := s.checkParams(t, f.params); err != nil {
			c.fail(label, "error %s: %v", f.err, err)
			return f, f.err, false
		}
		if callErr == nil {
			c.fail(label, "the bindings returned no error for error %s", f.err)
			return f, f.err, false
		}
		for _, a := range allowed {
			if a == f.err {
				return f, f.err, true
			}
		}
		c.fail(label, "unexpected error %s %s", f.err, f.params)
		return f, f.err, false
	}
	s := c.quaked
	if strings.HasPrefix(method, "org.varlink.service.") {
		s = c.service
	}
	m := s.method(strings.TrimPrefix(method, s.iface.Name+"."))
	if m == nil {
		c.fail(label, "no method %s in the interface", method)
		return f, "", false
	}
	if err := s.checkParams(m.Out, f.params); err != nil {
		c.fail(label, "reply does not fit the interface: %v", err)
		return f, "", false
	}
	if callErr != nil {
		c.fail(label, "the bindings failed on a valid reply: %v", callErr)
		return f, "", false
	}
	return f, "", true
}

// decoded checks that the values the bindings returned encode to the JSON that was sent.
func (c *client) decoded(label string, f frame, values interface{}) bool {
	if err := sameJSON(f.params, values); err != nil {
		c.fail(label, "decoding with the generated types: %v", err)
		return false
	}
	return true
}

// --- org.varlink.service ---

func (c *client) getInfo() {
	const label = "GetInfo"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	var vendor, product, version, url string
	var interfaces []string
	c.sum.Calls++
	callErr := l.conn.GetInfo(ctx, &vendor, &product, &version, &url, &interfaces)
	f, _, ok := c.reply(label, "org.varlink.service.GetInfo", l, callErr, false)
	if !ok || !c.decoded(label, f, map[string]interface{}{
		"vendor": vendor, "product": product, "version": version, "url": url, "interfaces": interfaces,
	}) {
		return
	}
	for _, want := range []string{"org.varlink.service", "io.quaked"} {
		if !contains(interfaces, want) {
			c.fail(label, "interfaces %v lack %s", interfaces, want)
			return
		}
	}
	c.ok(label)
}

func (c *client) getInterfaceDescription(builtFrom string) {
	const label = "GetInterfaceDescription"
	for _, name := range []string{"io.quaked", "org.varlink.service"} {
		l, err := c.link()
		if err != nil {
			c.fail(label, "%v", err)
			return
		}
		ctx, cancel := c.context()
		c.sum.Calls++
		description, callErr := l.conn.GetInterfaceDescription(ctx, name)
		cancel()
		f, _, ok := c.reply(label, "org.varlink.service.GetInterfaceDescription", l, callErr, false)
		if !ok || !c.decoded(label, f, map[string]interface{}{"description": description}) {
			return
		}
		parsed, err := idl.New(description)
		if err != nil {
			c.fail(label, "the description of %s does not parse: %v", name, err)
			return
		}
		if parsed.Name != name {
			c.fail(label, "asked for %s, got interface %s", name, parsed.Name)
			return
		}
		if name == "io.quaked" && strings.TrimRight(description, "\n") != strings.TrimRight(builtFrom, "\n") {
			c.fail(label, "quaked serves another io.quaked than the one this client was built from")
			return
		}
	}
	c.ok(label)
}

// --- io.quaked ---

func (c *client) getStatus() (storeID string, ok bool) {
	const label = "GetStatus"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return "", false
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	version, storeID, head, oldest, count, dbBytes, lastChange, feeds, subscribers, clients, catalog, backfills, sources, association, callErr := ioquaked.GetStatus().Call(ctx, l.conn)
	f, _, ok := c.reply(label, "io.quaked.GetStatus", l, callErr, false)
	if !ok || !c.decoded(label, f, map[string]interface{}{
		"version": version, "storeId": storeID, "headToken": head, "oldestToken": oldest,
		"quakeCount": count, "databaseBytes": dbBytes, "lastChange": lastChange, "feeds": feeds,
		"subscribers": subscribers, "clients": clients, "catalog": catalog, "backfills": backfills,
		"sources": sources, "association": association,
	}) {
		return "", false
	}
	if oldest > head {
		c.fail(label, "oldestToken %d is after headToken %d", oldest, head)
		return "", false
	}
	c.ok(label)
	return storeID, true
}

func (c *client) subscribe(storeID string) {
	const label = "Subscribe"
	// Its own connection: a subscription never ends, so the connection is closed after the
	// first reply.
	l, err := c.open()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	defer l.conn.Close()
	ctx, cancel := c.context()
	defer cancel()
	heartbeat := int64(30)
	c.sum.Calls++
	receive, callErr := ioquaked.Subscribe().Send(ctx, l.conn, varlink.More, &c.opt.clientName, &heartbeat, nil)
	if callErr != nil {
		c.fail(label, "%v", callErr)
		return
	}
	event, sid, head, author, flags, callErr := receive(ctx)
	f, _, ok := c.reply(label, "io.quaked.Subscribe", l, callErr, true)
	if !ok || !c.decoded(label, f, map[string]interface{}{"event": event, "storeId": sid, "headToken": head, "author": author}) {
		return
	}
	switch {
	case event != "subscribed":
		c.fail(label, "first event is %q, not subscribed", event)
	case flags&varlink.Continues == 0:
		c.fail(label, "the subscribed reply does not continue")
	case sid != storeID:
		c.fail(label, "storeId %s, GetStatus said %s", sid, storeID)
	default:
		c.ok(label)
	}
}

func (c *client) refresh() {
	const label = "Refresh"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	var feed *string
	if c.opt.feed != "" {
		feed = &c.opt.feed
	}
	c.sum.Calls++
	results, head, sourceResults, callErr := ioquaked.Refresh().Call(ctx, l.conn, feed, nil)
	f, _, ok := c.reply(label, "io.quaked.Refresh", l, callErr, false)
	if !ok || !c.decoded(label, f, map[string]interface{}{"results": results, "headToken": head, "sourceResults": sourceResults}) {
		return
	}
	if feed != nil && len(results) != 1 {
		c.fail(label, "one feed refreshed, %d results", len(results))
		return
	}
	c.ok(label)
}

// fetchHistory reads every transaction after 0 (after oldestToken when that history is
// purged), page by page; it returns the last token applied.
func (c *client) fetchHistory(storeID string) int64 {
	const label = "FetchHistory"
	after := int64(0)
	expired := false
	for page := 0; ; page++ {
		if page > 1000000 {
			c.fail(label, "more than a million pages")
			return after
		}
		l, err := c.link()
		if err != nil {
			c.fail(label, "%v", err)
			return after
		}
		ctx, cancel := c.context()
		c.sum.Calls++
		sid, head, oldest, transactions, hasMore, nextAfter, callErr := ioquaked.FetchHistory().Call(
			ctx, l.conn, &storeID, after, &c.opt.limit, &c.opt.maxChanges, &c.opt.clientName, nil)
		cancel()
		f, errName, ok := c.reply(label, "io.quaked.FetchHistory", l, callErr, false, "io.quaked.TokenExpired")
		if !ok {
			return after
		}
		if errName != "" {
			var te *ioquaked.TokenExpired
			if !errors.As(callErr, &te) {
				c.fail(label, "the bindings did not decode TokenExpired: %v", callErr)
				return after
			}
			if !c.decoded(label, f, te) {
				return after
			}
			if expired || page > 0 || te.OldestToken <= after {
				c.fail(label, "TokenExpired after %d (oldestToken %d) while paging", after, te.OldestToken)
				return after
			}
			// History after 0 was purged: start from the oldest token still complete.
			expired = true
			c.ok(label + ":TokenExpired")
			after = te.OldestToken
			continue
		}
		if !c.decoded(label, f, map[string]interface{}{
			"storeId": sid, "headToken": head, "oldestToken": oldest, "transactions": transactions,
			"hasMore": hasMore, "nextAfter": nextAfter,
		}) {
			return after
		}
		c.sum.Seen.HistoryPages++
		if sid != storeID {
			c.fail(label, "storeId %s, asked for %s", sid, storeID)
			return after
		}
		last := after
		for _, tx := range transactions {
			if tx.Token <= last {
				c.fail(label, "transaction token %d is not after %d", tx.Token, last)
				return after
			}
			last = tx.Token
			c.transaction(fmt.Sprintf("%s: token %d", label, tx.Token), tx)
		}
		if last > head || nextAfter < last {
			c.fail(label, "last token %d, headToken %d, nextAfter %d", last, head, nextAfter)
			return after
		}
		if !hasMore {
			c.ok(label)
			return nextAfter
		}
		if nextAfter <= after {
			c.fail(label, "hasMore but nextAfter %d does not move past %d", nextAfter, after)
			return after
		}
		after = nextAfter
	}
}

// transaction checks what the interface says of changes and counts what was seen.
func (c *client) transaction(label string, tx ioquaked.Transaction) {
	c.sum.Seen.Transactions++
	c.sum.Seen.Authors[string(tx.Author)]++
	for _, ch := range tx.Changes {
		where := label + " " + ch.QuakeId
		c.sum.Seen.Changes[string(ch.Kind)]++
		switch ch.Kind {
		case "update":
			if ch.Fields == nil || len(*ch.Fields) == 0 {
				c.fail(where, "update without fields")
				continue
			}
			for _, fc := range *ch.Fields {
				c.fieldValue(where+" "+fc.Field+".old", fc.Field, fc.Old)
				c.fieldValue(where+" "+fc.Field+".new", fc.Field, fc.New)
			}
		case "delete":
			if ch.Reason == nil || ch.Tombstone == nil {
				c.fail(where, "delete without reason or tombstone")
				continue
			}
			c.sum.Seen.Reasons[string(*ch.Reason)]++
			if ch.Tombstone.Id != ch.QuakeId {
				c.fail(where, "tombstone of %s", ch.Tombstone.Id)
			}
			if *ch.Reason == "superseded" && ch.SupersededBy == nil {
				c.fail(where, "superseded without supersededBy")
			}
		}
		if ch.Quake != nil && ch.Quake.Id != ch.QuakeId {
			c.fail(where, "carries quake %s", ch.Quake.Id)
		}
	}
}

// fieldValue checks one FieldValue: exactly one member set, the one of the field's type in Quake.
func (c *client) fieldValue(label, field string, v *ioquaked.FieldValue) {
	if v == nil {
		c.sum.Seen.FieldValues["null"]++
		return
	}
	var set []string
	if v.Int != nil {
		set = append(set, "int")
	}
	if v.Float != nil {
		set = append(set, "float")
	}
	if v.String != nil {
		set = append(set, "string")
	}
	if len(set) != 1 {
		c.fail(label, "FieldValue with %d members set (%v)", len(set), set)
		return
	}
	c.sum.Seen.FieldValues[set[0]]++
	want, found := c.quakeFieldType(field)
	if !found {
		c.fail(label, "%s is not a field of Quake", field)
	} else if want != set[0] {
		c.fail(label, "%s is a %s field, the value is a %s", field, want, set[0])
	}
}

func (c *client) quakeFieldType(field string) (string, bool) {
	quake, ok := c.quaked.aliases["Quake"]
	if !ok {
		return "", false
	}
	for _, f := range quake.Fields {
		if f.Name != field {
			continue
		}
		t := f.Type
		if t.Kind == idl.TypeMaybe {
			t = t.ElementType
		}
		switch t.Kind {
		case idl.TypeInt:
			return "int", true
		case idl.TypeFloat:
			return "float", true
		case idl.TypeString:
			return "string", true
		}
		return "", false
	}
	return "", false
}

func (c *client) acknowledge(token int64) {
	const label = "Acknowledge"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	callErr := ioquaked.Acknowledge().Call(ctx, l.conn, c.opt.clientName, token, nil)
	f, _, ok := c.reply(label, "io.quaked.Acknowledge", l, callErr, false)
	if ok && c.decoded(label, f, map[string]interface{}{}) {
		c.ok(label)
	}
}

// snapshot reads every page of one Snapshot (its own connection, with more).
func (c *client) snapshot(storeID string) []ioquaked.Quake {
	const label = "Snapshot"
	l, err := c.open()
	if err != nil {
		c.fail(label, "%v", err)
		return nil
	}
	defer l.conn.Close()
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	receive, callErr := ioquaked.Snapshot().Send(ctx, l.conn, varlink.More, &c.opt.pageSize, nil)
	if callErr != nil {
		c.fail(label, "%v", callErr)
		return nil
	}
	var all []ioquaked.Quake
	var token int64
	for page := 0; ; page++ {
		sid, tok, quakes, flags, callErr := receive(ctx)
		f, _, ok := c.reply(label, "io.quaked.Snapshot", l, callErr, true)
		if !ok || !c.decoded(label, f, map[string]interface{}{"storeId": sid, "token": tok, "quakes": quakes}) {
			return all
		}
		c.sum.Seen.SnapshotPages++
		if sid != storeID {
			c.fail(label, "storeId %s, GetStatus said %s", sid, storeID)
			return all
		}
		if page == 0 {
			token = tok
		} else if tok != token {
			c.fail(label, "page %d is as of token %d, the first as of %d", page, tok, token)
			return all
		}
		if int64(len(quakes)) > c.opt.pageSize {
			c.fail(label, "%d quakes in a page of at most %d", len(quakes), c.opt.pageSize)
			return all
		}
		for _, q := range quakes {
			if len(all) > 0 && q.Id <= all[len(all)-1].Id {
				c.fail(label, "%s after %s: not ordered by id", q.Id, all[len(all)-1].Id)
				return all
			}
			all = append(all, q)
		}
		if flags&varlink.Continues == 0 {
			break
		}
	}
	c.sum.Seen.Quakes = len(all)
	c.ok(label)
	return all
}

// query calls Query with every parameter, built from a stored quake so that it must match,
// once per order.
func (c *client) query(quakes []ioquaked.Quake) {
	const label = "Query"
	minMag, since, kind := 0.0, int64(0), "earthquake"
	near := ioquaked.Near{Lat: 0, Lon: 0, RadiusKm: 20100} // all of the Earth
	var ref *ioquaked.Quake
	for i := range quakes {
		q := &quakes[i]
		if q.Mag != nil && q.Lat != nil && q.Lon != nil && q.Type != nil {
			ref = q
			minMag, since, kind = *q.Mag, q.Time, *q.Type
			near = ioquaked.Near{Lat: *q.Lat, Lon: *q.Lon, RadiusKm: 1}
			break
		}
	}
	if ref == nil {
		c.sum.Skipped = append(c.sum.Skipped, "Query:match (no stored quake with mag, lat, lon and type)")
	}
	limit := int64(10)
	for _, order := range []ioquaked.QueryOrder{"magnitude", "time"} {
		l, err := c.link()
		if err != nil {
			c.fail(label, "%v", err)
			return
		}
		ctx, cancel := c.context()
		order := order
		c.sum.Calls++
		result, total, head, callErr := ioquaked.Query().Call(ctx, l.conn, &minMag, &since, &kind, &near, &limit, &order, nil)
		cancel()
		where := fmt.Sprintf("%s(order %s)", label, order)
		f, _, ok := c.reply(where, "io.quaked.Query", l, callErr, false)
		if !ok || !c.decoded(where, f, map[string]interface{}{"quakes": result, "total": total, "headToken": head}) {
			return
		}
		if int64(len(result)) > limit || total < int64(len(result)) {
			c.fail(where, "%d quakes, total %d, limit %d", len(result), total, limit)
			return
		}
		found := false
		for i, q := range result {
			found = found || (ref != nil && q.Id == ref.Id)
			if q.Mag == nil || *q.Mag < minMag || q.Time < since || q.Type == nil || *q.Type != kind {
				c.fail(where, "%s does not match the filters", q.Id)
				return
			}
			if i > 0 {
				prev := result[i-1]
				if (order == "magnitude" && *q.Mag > *prev.Mag) || (order == "time" && q.Time > prev.Time) {
					c.fail(where, "%s after %s: not in %s order", q.Id, prev.Id, order)
					return
				}
			}
		}
		if ref != nil && !found && int64(len(result)) < limit {
			c.fail(where, "does not return %s, which matches every filter", ref.Id)
			return
		}
	}
	c.ok(label)
}

func (c *client) get(quakes []ioquaked.Quake) {
	const label = "Get"
	if len(quakes) == 0 {
		c.sum.Skipped = append(c.sum.Skipped, "Get (the snapshot is empty)")
		return
	}
	id := quakes[len(quakes)/2].Id
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	quake, callErr := ioquaked.Get().Call(ctx, l.conn, id)
	f, _, ok := c.reply(label, "io.quaked.Get", l, callErr, false)
	if !ok || !c.decoded(label, f, map[string]interface{}{"quake": quake}) {
		return
	}
	if quake.Id != id {
		c.fail(label, "asked for %s, got %s", id, quake.Id)
		return
	}
	c.ok(label)
}

func (c *client) getUnknown() {
	const label = "Get:NoSuchQuake"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	_, callErr := ioquaked.Get().Call(ctx, l.conn, unknownID)
	f, errName, ok := c.reply(label, "io.quaked.Get", l, callErr, false, "io.quaked.NoSuchQuake")
	if !ok {
		return
	}
	if errName == "" {
		c.fail(label, "Get of an unknown id replied with a quake")
		return
	}
	var e *ioquaked.NoSuchQuake
	if !errors.As(callErr, &e) {
		c.fail(label, "the bindings did not decode NoSuchQuake: %v", callErr)
		return
	}
	if !c.decoded(label, f, e) {
		return
	}
	if e.Id != unknownID {
		c.fail(label, "NoSuchQuake names %q", e.Id)
		return
	}
	c.ok(label)
}

// getReports asks for the reports of a stored quake (a feed's quake has none: an empty list),
// then of an unknown id, which is NoSuchQuake.
func (c *client) getReports(quakes []ioquaked.Quake) {
	const label = "GetReports"
	if len(quakes) == 0 {
		c.sum.Skipped = append(c.sum.Skipped, "GetReports (the snapshot is empty)")
		return
	}
	id := quakes[len(quakes)/2].Id
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	reports, callErr := ioquaked.GetReports().Call(ctx, l.conn, id)
	f, _, ok := c.reply(label, "io.quaked.GetReports", l, callErr, false)
	if !ok || !c.decoded(label, f, map[string]interface{}{"reports": reports}) {
		return
	}
	preferred := 0
	for _, r := range reports {
		if r.Preferred {
			preferred++
		}
	}
	if len(reports) > 0 && (preferred != 1 || !reports[0].Preferred) {
		c.fail(label, "the preferred report is not the one first: %+v", reports)
		return
	}
	c.ok(label)

	const unknownLabel = "GetReports:NoSuchQuake"
	l, err = c.link()
	if err != nil {
		c.fail(unknownLabel, "%v", err)
		return
	}
	c.sum.Calls++
	_, callErr = ioquaked.GetReports().Call(ctx, l.conn, unknownID)
	f, errName, ok := c.reply(unknownLabel, "io.quaked.GetReports", l, callErr, false, "io.quaked.NoSuchQuake")
	if !ok {
		return
	}
	var e *ioquaked.NoSuchQuake
	if errName == "" || !errors.As(callErr, &e) {
		c.fail(unknownLabel, "GetReports of an unknown id: %v", callErr)
		return
	}
	if !c.decoded(unknownLabel, f, e) {
		return
	}
	if e.Id != unknownID {
		c.fail(unknownLabel, "NoSuchQuake names %q", e.Id)
		return
	}
	c.ok(unknownLabel)
}

func (c *client) deleteUnknown() {
	const label = "Delete"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	token, deleted, notFound, callErr := ioquaked.Delete().Call(ctx, l.conn, []string{unknownID})
	f, errName, ok := c.reply(label, "io.quaked.Delete", l, callErr, false, permissionDenied)
	if !ok {
		return
	}
	if errName != "" {
		c.ok(label + ":PermissionDenied")
		return
	}
	if !c.decoded(label, f, map[string]interface{}{"token": token, "deleted": deleted, "notFound": notFound}) {
		return
	}
	if token != nil || len(deleted) != 0 || len(notFound) != 1 || notFound[0] != unknownID {
		c.fail(label, "deleting only an unknown id: token %v, deleted %v, notFound %v", token, deleted, notFound)
		return
	}
	c.ok(label)
}

func (c *client) reload() {
	const label = "Reload"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	callErr := ioquaked.Reload().Call(ctx, l.conn)
	f, errName, ok := c.reply(label, "io.quaked.Reload", l, callErr, false, permissionDenied)
	if !ok {
		return
	}
	if errName != "" {
		c.ok(label + ":PermissionDenied")
		return
	}
	if c.decoded(label, f, map[string]interface{}{}) {
		c.ok(label)
	}
}

func (c *client) metrics() {
	const label = "Metrics"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	text, callErr := ioquaked.Metrics().Call(ctx, l.conn)
	f, _, ok := c.reply(label, "io.quaked.Metrics", l, callErr, false)
	if !ok || !c.decoded(label, f, map[string]interface{}{"text": text}) {
		return
	}
	if !strings.Contains(text, "# TYPE quaked_history_head_token gauge") {
		c.fail(label, "the text has no quaked_history_head_token: %.200q", text)
		return
	}
	c.ok(label)
}

// backfill starts a job on a catalog nothing listens on, reads it back with BackfillStatus,
// asks for an unknown job (NoSuchBackfill), and cancels it.
func (c *client) backfill() {
	const label = "Backfill"
	l, err := c.link()
	if err != nil {
		c.fail(label, "%v", err)
		return
	}
	ctx, cancel := c.context()
	defer cancel()
	c.sum.Calls++
	end := int64(1546387200000)
	minMag := 4.5
	catalog := "http://127.0.0.1:9/fdsnws/event/1/"
	near := ioquaked.Near{Lat: 35.7, Lon: 139.7, RadiusKm: 300}
	job, callErr := ioquaked.Backfill().Call(ctx, l.conn, 1546300800000, &end, &minMag, &near, nil, &catalog, nil)
	f, errName, ok := c.reply(label, "io.quaked.Backfill", l, callErr, false, permissionDenied)
	if !ok {
		return
	}
	if errName != "" {
		c.ok(label + ":PermissionDenied")
		return
	}
	if !c.decoded(label, f, map[string]interface{}{"job": job}) {
		return
	}
	if (job.State != "queued" && job.State != "running") || job.Near == nil || job.Near.RadiusKm != 300 || job.End != end {
		c.fail(label, "unexpected job %+v", job)
		return
	}
	c.ok(label)

	const statusLabel = "BackfillStatus"
	c.sum.Calls++
	id := job.Id
	jobs, callErr := ioquaked.BackfillStatus().Call(ctx, l.conn, &id)
	f, _, ok = c.reply(statusLabel, "io.quaked.BackfillStatus", l, callErr, false)
	if !ok || !c.decoded(statusLabel, f, map[string]interface{}{"jobs": jobs}) {
		return
	}
	if len(jobs) != 1 || jobs[0].Id != id || jobs[0].Catalog != catalog {
		c.fail(statusLabel, "BackfillStatus(%d) gave %+v", id, jobs)
		return
	}
	c.ok(statusLabel)

	const unknownLabel = "BackfillStatus:NoSuchBackfill"
	c.sum.Calls++
	unknown := int64(987654)
	_, callErr = ioquaked.BackfillStatus().Call(ctx, l.conn, &unknown)
	f, errName, ok = c.reply(unknownLabel, "io.quaked.BackfillStatus", l, callErr, false, "io.quaked.NoSuchBackfill")
	if !ok {
		return
	}
	var e *ioquaked.NoSuchBackfill
	if errName == "" || !errors.As(callErr, &e) || e.Id != unknown {
		c.fail(unknownLabel, "expected NoSuchBackfill for %d: %v", unknown, callErr)
		return
	}
	if c.decoded(unknownLabel, f, e) {
		c.ok(unknownLabel)
	}

	const cancelLabel = "BackfillCancel"
	c.sum.Calls++
	cancelled, callErr := ioquaked.BackfillCancel().Call(ctx, l.conn, id)
	f, _, ok = c.reply(cancelLabel, "io.quaked.BackfillCancel", l, callErr, false)
	if !ok || !c.decoded(cancelLabel, f, map[string]interface{}{"job": cancelled}) {
		return
	}
	if cancelled.State != "cancelled" || cancelled.FinishedAt == nil {
		c.fail(cancelLabel, "the job after cancelling: %+v", cancelled)
		return
	}
	c.ok(cancelLabel)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
