// The colly peer of `crawlfleet bench peers`: gocolly/colly v2 crawling the testbed as its users would
// write it, at the bench's politeness (N requests per host, robots.txt obeyed, no delay).
//
// Flags: -seeds FILE (one URL a line), -dns HOST:PORT (the testbed's DNS server), -ca FILE (trust this CA
// for https; "" = the system's), -mode perhost|global, -parallelism N, -hosts H (site0..site{H-1}: one
// LimitRule per host in perhost mode, since one rule caps every domain its glob matches together),
// -deny REGEXP (repeatable), -agent UA. Before each Visit the URL's fragment is cut and its host
// lower-cased: colly counts page#a and page#b, or HOST and host, as different pages.
// Prints one JSON line at the end: {"visited": n, "errors": n}.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	seedsFile := flag.String("seeds", "", "file of seed URLs")
	dnsAddr := flag.String("dns", "", "DNS server HOST:PORT")
	caFile := flag.String("ca", "", "extra CA (PEM) for https")
	mode := flag.String("mode", "perhost", "perhost or global")
	par := flag.Int("parallelism", 4, "requests per host (perhost) or in all (global)")
	hosts := flag.Int("hosts", 0, "testbed hosts site0..site{H-1}")
	agent := flag.String("agent", "crawlfleet-peer-colly", "User-Agent")
	var deny multi
	flag.Var(&deny, "deny", "URL regexp not to visit (repeatable)")
	flag.Parse()

	raw, err := os.ReadFile(*seedsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c := colly.NewCollector(colly.Async(true), colly.UserAgent(*agent))
	c.IgnoreRobotsTxt = false
	c.URLFilters = []*regexp.Regexp{regexp.MustCompile(`^https?://site[0-9]+\.crawl\.test(:[0-9]+)?/`)}
	for _, d := range deny {
		c.DisallowedURLFilters = append(c.DisallowedURLFilters, regexp.MustCompile(d))
	}

	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "udp", *dnsAddr)
	}}
	tlsConf := &tls.Config{}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		pool, _ := x509.SystemCertPool()
		if pool == nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(pem)
		tlsConf.RootCAs = pool
	}
	c.WithTransport(&http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, Resolver: resolver}).DialContext,
		TLSClientConfig:     tlsConf,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: *par,
		IdleConnTimeout:     15 * time.Second,
	})
	c.SetRequestTimeout(30 * time.Second)

	if *mode == "global" {
		must(c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: *par}))
	} else {
		for i := 0; i < *hosts; i++ {
			must(c.Limit(&colly.LimitRule{DomainRegexp: fmt.Sprintf(`^site%d\.crawl\.test(:[0-9]+)?$`, i), Parallelism: *par}))
		}
	}

	var visited, errors int64
	c.OnResponse(func(r *colly.Response) { atomic.AddInt64(&visited, 1) })
	c.OnError(func(r *colly.Response, err error) { atomic.AddInt64(&errors, 1) })
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		if strings.Contains(strings.ToLower(e.Attr("rel")), "nofollow") {
			return
		}
		u, err := url.Parse(e.Request.AbsoluteURL(e.Attr("href")))
		if err != nil || u.Host == "" {
			return
		}
		u.Fragment, u.RawFragment = "", ""
		u.Host = strings.ToLower(u.Host)
		_ = e.Request.Visit(u.String())
	})

	for _, line := range strings.Split(string(raw), "\n") {
		if s := strings.TrimSpace(line); s != "" {
			_ = c.Visit(s)
		}
	}
	c.Wait()
	out, _ := json.Marshal(map[string]int64{"visited": visited, "errors": errors})
	fmt.Println(string(out))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}
