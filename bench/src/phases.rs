//! The load phases, each with a fixed concurrency and count: create, get and list from each state a client can
//! ask for, paged lists, conflicting updates, watch latency, watch fan-out, delete.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::Sizes;
use crate::progress::Progress;
use crate::report::PhaseResult;

const TOPPINGS: &str = "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings";

/// One benchmark run against one server.
pub struct Load {
    pub client: reqwest::Client,
    /// Clients of their own for the watchers, at most [`WATCHES_PER_CONNECTION`] watches on each: over the
    /// writers' connection, a thousand open watches would take every HTTP/2 stream the server allows on it and the
    /// writes would wait for one.
    pub watch_clients: Vec<reqwest::Client>,
    pub base: String,
    pub sizes: Sizes,
    /// Where the running phase is, on stderr.
    pub progress: Progress,
    payload: String,
}

/// Which state a read asks for, by `resourceVersion` (and `resourceVersionMatch`), as a client can.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// `resourceVersion` unset: the latest state (a consistent read).
    Latest,
    /// `resourceVersion=0`: any state the server has (its watch cache).
    Any,
    /// `resourceVersion=N` with N the collection's version when the phase starts: a state no older than N
    /// (`resourceVersionMatch=NotOlderThan` for a list, the only meaning a GET has).
    NotOlderThan,
    /// `resourceVersion=N&resourceVersionMatch=Exact` (lists only): the state at exactly N.
    Exact,
}

impl ReadFrom {
    /// The phase's name after its verb, e.g. `list (rv=0)`.
    fn phase_name(self, verb: &str) -> String {
        match self {
            ReadFrom::Latest if verb == "get" => "get".to_string(),
            ReadFrom::Latest => format!("{verb} (rv unset)"),
            ReadFrom::Any => format!("{verb} (rv=0)"),
            ReadFrom::NotOlderThan => format!("{verb} (rv=N, not older)"),
            ReadFrom::Exact => format!("{verb} (rv=N, exact)"),
        }
    }

    /// The query string for a collection at version `current`.
    fn query(self, current: &str) -> String {
        match self {
            ReadFrom::Latest => String::new(),
            ReadFrom::Any => "?resourceVersion=0".to_string(),
            ReadFrom::NotOlderThan => format!("?resourceVersion={current}"),
            ReadFrom::Exact => format!("?resourceVersion={current}&resourceVersionMatch=Exact"),
        }
    }
}

/// How many watches the harness opens on one connection (client-go's default stream limit is 250 too).
pub const WATCHES_PER_CONNECTION: usize = 250;

/// When a watch saw each named object's ADDED event.
type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// The outcome of one request: its latency and HTTP status (0 when it did not get one).
type Outcome = (Duration, u16);

impl Load {
    pub fn new(
        client: reqwest::Client,
        watch_clients: Vec<reqwest::Client>,
        base: String,
        sizes: Sizes,
        progress: Progress,
    ) -> Self {
        let payload = "x".repeat(sizes.value_bytes);
        Load {
            client,
            watch_clients,
            base,
            sizes,
            progress,
            payload,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn topping(&self, name: &str, cost: f64) -> Value {
        json!({
            "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
            "kind": "Topping",
            "metadata": {"name": name, "annotations": {"bench.apiserver/payload": self.payload}},
            "spec": {"cost": cost}
        })
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Outcome {
        let start = Instant::now();
        let status = match request.send().await {
            Ok(mut response) => {
                let status = response.status().as_u16();
                // Read to the end, piece by piece: gathering a large list into one buffer would spend the
                // harness's share of the CPU on copying it.
                while let Ok(Some(_)) = response.chunk().await {}
                status
            }
            Err(_) => 0,
        };
        (start.elapsed(), status)
    }

    /// Runs `count` requests made by `make(i)` on `concurrency` workers.
    async fn parallel<F, Fut>(
        &self,
        name: &str,
        concurrency: usize,
        count: usize,
        ok: u16,
        make: F,
    ) -> PhaseResult
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static + Clone,
        Fut: std::future::Future<Output = Outcome> + Send,
    {
        let next = Arc::new(AtomicUsize::new(0));
        self.progress.start(name, count);
        let progress = &self.progress;
        let start = Instant::now();
        let mut workers = Vec::new();
        for _ in 0..concurrency.max(1) {
            let (next, make) = (next.clone(), make.clone());
            workers.push(async move {
                let mut outcomes = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= count {
                        break outcomes;
                    }
                    outcomes.push(make(i).await);
                    progress.step();
                }
            });
        }
        let outcomes: Vec<Outcome> = futures::future::join_all(workers)
            .await
            .into_iter()
            .flatten()
            .collect();
        PhaseResult::from_outcomes(name, concurrency, start.elapsed(), &outcomes, ok)
    }

    /// Unmeasured requests before the phases, the same whatever authenticates the load: a GET of every name the
    /// get phase will ask for (404 now: the objects do not exist yet), then a dry-run create and a list. Under
    /// delegated authentication and authorization they fill the server's token cache and its access-review cache
    /// (one entry per verb and name), so the phases meet warm caches; the create comes last so that, when there
    /// are more names than the cache holds, the create phase's one question is still among the newest. Any answer
    /// other than the expected one (401 or 403 from missing RBAC, say) is an error.
    pub async fn warm(self: &Arc<Self>) -> Result<(), String> {
        let load = self.clone();
        let gets = self
            .parallel(
                "warm",
                self.sizes.concurrency,
                self.sizes.objects,
                404,
                move |i| {
                    let load = load.clone();
                    async move {
                        load.send(load.client.get(load.url(&format!("{TOPPINGS}/t-{i}"))))
                            .await
                    }
                },
            )
            .await;
        // 200: a server reached by kubeconfig may still hold objects of an earlier run.
        if let Some((status, n)) = gets.errors.iter().find(|(status, _)| **status != 200) {
            return Err(format!(
                "warming up: {n} GETs of toppings answered {status}, not 404 (or 200)"
            ));
        }
        let list = self
            .send(self.client.get(self.url(&format!("{TOPPINGS}?limit=1"))))
            .await;
        let dry_run = self
            .send(
                self.client
                    .post(self.url(&format!("{TOPPINGS}?dryRun=All")))
                    .json(&self.topping("warm", 0.0)),
            )
            .await;
        for (what, (_, status), ok) in [("list", list, 200), ("dry-run create", dry_run, 201)] {
            if status != ok {
                return Err(format!("warming up: {what} of toppings answered {status}"));
            }
        }
        Ok(())
    }

    pub async fn create(self: &Arc<Self>) -> PhaseResult {
        self.create_range("create", 0..self.sizes.objects).await
    }

    /// Creates toppings `t-<i>` for every `i` of `range`.
    pub async fn create_range(
        self: &Arc<Self>,
        name: &str,
        range: std::ops::Range<usize>,
    ) -> PhaseResult {
        let load = self.clone();
        let first = range.start;
        self.parallel(name, self.sizes.concurrency, range.len(), 201, move |i| {
            let load = load.clone();
            async move {
                let body = load.topping(&format!("t-{}", first + i), (first + i) as f64);
                load.send(load.client.post(load.url(TOPPINGS)).json(&body))
                    .await
            }
        })
        .await
    }

    /// GETs of `self.sizes.gets` names spread over the first `objects` toppings (a stride prime to their number, so
    /// that a large store is read all over, not only at its start).
    pub async fn get_spread(self: &Arc<Self>, objects: usize) -> PhaseResult {
        let load = self.clone();
        let objects = objects.max(1);
        let stride = [7_919, 104_729, 1_299_709]
            .into_iter()
            .find(|p| !objects.is_multiple_of(*p))
            .unwrap_or(1);
        self.parallel(
            "get (names spread)",
            self.sizes.concurrency,
            self.sizes.gets,
            200,
            move |i| {
                let load = load.clone();
                async move {
                    let name = format!("t-{}", (i * stride) % objects);
                    load.send(load.client.get(load.url(&format!("{TOPPINGS}/{name}"))))
                        .await
                }
            },
        )
        .await
    }

    /// One page of 500 toppings after `token`: its status (0 without an answer) and its continue token (empty on
    /// the last page; `None` when the answer is not a readable list).
    async fn page(&self, token: &str) -> (u16, Option<String>) {
        #[derive(serde::Deserialize)]
        struct Page {
            metadata: PageMeta,
        }
        #[derive(serde::Deserialize)]
        struct PageMeta {
            #[serde(default, rename = "continue")]
            continue_: String,
        }
        let request = self
            .client
            .get(self.url(TOPPINGS))
            .query(&[("limit", "500"), ("continue", token)]);
        let Ok(response) = request.send().await else {
            return (0, None);
        };
        let status = response.status().as_u16();
        let body = response.bytes().await.unwrap_or_default();
        let next = serde_json::from_slice::<Page>(&body)
            .ok()
            .map(|p| p.metadata.continue_);
        (status, next)
    }

    /// The length of one topping's JSON as the server answers a GET (0 when it cannot be read).
    pub async fn object_bytes(&self, name: &str) -> usize {
        match self
            .client
            .get(self.url(&format!("{TOPPINGS}/{name}")))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => r.bytes().await.map(|b| b.len()).unwrap_or(0),
            _ => 0,
        }
    }

    /// Single pages of `limit=500`, each request one page: every client walks from the first page on, following
    /// the continue tokens, and starts again after `pages_per_walk` pages or at the end; so first and later pages
    /// are both measured, each on its own.
    pub async fn pages(self: &Arc<Self>, requests: usize, pages_per_walk: usize) -> PhaseResult {
        let load = self.clone();
        let clients = self.sizes.concurrency.min(4);
        // One walk position (page number and token) per client.
        let walks = Arc::new(std::sync::Mutex::new(vec![
            (0usize, String::new());
            clients
        ]));
        self.parallel("page (limit=500)", clients, requests, 200, move |i| {
            let (load, walks) = (load.clone(), walks.clone());
            async move {
                let walk = i % clients;
                let (page, token) = walks.lock().unwrap_or_else(|e| e.into_inner())[walk].clone();
                let start = Instant::now();
                let (status, next) = load.page(&token).await;
                let elapsed = start.elapsed();
                let next = next.filter(|t| !t.is_empty() && page + 1 < pages_per_walk);
                walks.lock().unwrap_or_else(|e| e.into_inner())[walk] = match next {
                    Some(token) => (page + 1, token),
                    None => (0, String::new()),
                };
                (elapsed, status)
            }
        })
        .await
    }

    /// GETs of the created objects in turn, from the state `from` asks for (never `Exact`: a GET has no such
    /// match).
    pub async fn get(self: &Arc<Self>, from: ReadFrom) -> PhaseResult {
        let load = self.clone();
        let query = Arc::new(from.query(&self.collection_version().await));
        self.parallel(
            &from.phase_name("get"),
            self.sizes.concurrency,
            self.sizes.gets,
            200,
            move |i| {
                let (load, query) = (load.clone(), query.clone());
                async move {
                    let name = format!("t-{}", i % load.sizes.objects.max(1));
                    load.send(
                        load.client
                            .get(load.url(&format!("{TOPPINGS}/{name}{query}"))),
                    )
                    .await
                }
            },
        )
        .await
    }

    /// Lists everything, from the state `from` asks for: the latest (a consistent read), any (the cache), or the
    /// collection's version when the phase starts (exactly, or not older).
    pub async fn list(self: &Arc<Self>, from: ReadFrom) -> PhaseResult {
        let load = self.clone();
        let query = Arc::new(from.query(&self.collection_version().await));
        self.parallel(
            &from.phase_name("list"),
            self.sizes.concurrency.min(4),
            self.sizes.lists,
            200,
            move |_| {
                let (load, query) = (load.clone(), query.clone());
                async move {
                    load.send(load.client.get(load.url(&format!("{TOPPINGS}{query}"))))
                        .await
                }
            },
        )
        .await
    }

    /// LISTs from the cache (rv=0) asking for gzip, as Go clients and kubectl do by default (`Accept-Encoding:
    /// gzip`): the server compresses bodies over 128 KiB. Notes the bytes of one LIST as sent with and without
    /// gzip (`list_bytes_gzip`, `list_bytes_identity`); the phase's server CPU against `list (rv=0)`'s is what
    /// compressing costs.
    pub async fn list_gzip(self: &Arc<Self>) -> PhaseResult {
        let path = format!("{TOPPINGS}?resourceVersion=0");
        let mut sizes = Vec::new();
        for encoding in ["identity", "gzip"] {
            let sent = match self
                .client
                .get(self.url(&path))
                .header("accept-encoding", encoding)
                .send()
                .await
            {
                Ok(response) => response.bytes().await.map(|b| b.len()).unwrap_or(0),
                Err(_) => 0,
            };
            sizes.push(sent);
        }
        let load = self.clone();
        let path = Arc::new(path);
        let mut result = self
            .parallel(
                "list (rv=0, gzip)",
                self.sizes.concurrency.min(4),
                self.sizes.lists,
                200,
                move |_| {
                    let (load, path) = (load.clone(), path.clone());
                    async move {
                        load.send(
                            load.client
                                .get(load.url(&path))
                                .header("accept-encoding", "gzip"),
                        )
                        .await
                    }
                },
            )
            .await;
        result
            .extra
            .insert("list_bytes_identity".into(), serde_json::json!(sizes[0]));
        result
            .extra
            .insert("list_bytes_gzip".into(), serde_json::json!(sizes[1]));
        result
    }

    /// One LIST of the whole collection, alone: the first after the writes, which encodes every item in the
    /// served form (later LISTs find the encodings kept), so that the list phases after it compare alike.
    pub async fn first_list(self: &Arc<Self>) -> PhaseResult {
        let load = self.clone();
        self.parallel("list (first, encodes every item)", 1, 1, 200, move |_| {
            let load = load.clone();
            async move { load.send(load.client.get(load.url(TOPPINGS))).await }
        })
        .await
    }

    /// Walks the whole collection in pages of 500 (`limit` and `continue`, as kubectl and informers list): one
    /// request of this phase is one walk, from the first page to the last.
    pub async fn list_pages(self: &Arc<Self>) -> PhaseResult {
        let load = self.clone();
        self.parallel(
            "list (pages of 500)",
            self.sizes.concurrency.min(4),
            self.sizes.lists,
            200,
            move |_| {
                let load = load.clone();
                async move {
                    let start = Instant::now();
                    let mut token = String::new();
                    loop {
                        match load.page(&token).await {
                            (200, Some(next)) if next.is_empty() => break,
                            (200, Some(next)) => token = next,
                            (200, None) => return (start.elapsed(), 0),
                            (status, _) => return (start.elapsed(), status),
                        }
                    }
                    (start.elapsed(), 200)
                }
            },
        )
        .await
    }

    /// Several clients increment one counter with read-modify-write PUTs; 409s are retried. Every acknowledged
    /// increment must be in the final value: `lost_updates` must be 0.
    pub async fn conflicts(self: &Arc<Self>) -> PhaseResult {
        let counter = format!("{TOPPINGS}/counter");
        let _ = self
            .send(
                self.client
                    .post(self.url(TOPPINGS))
                    .json(&self.topping("counter", 0.0)),
            )
            .await;
        let conflicts = Arc::new(AtomicUsize::new(0));
        let increments = self.sizes.increments;
        let load = self.clone();
        let c = conflicts.clone();
        let total = self.sizes.updaters * increments;
        let mut result = self
            .parallel(
                "update (conflicts)",
                self.sizes.updaters,
                total,
                200,
                move |_| {
                    let (load, conflicts, counter) = (load.clone(), c.clone(), counter.clone());
                    async move {
                        let start = Instant::now();
                        loop {
                            let Ok(current) = load.client.get(load.url(&counter)).send().await
                            else {
                                return (start.elapsed(), 0);
                            };
                            let Ok(mut object) = current.json::<Value>().await else {
                                return (start.elapsed(), 0);
                            };
                            let cost = object["spec"]["cost"].as_f64().unwrap_or_default();
                            object["spec"]["cost"] = json!(cost + 1.0);
                            match load
                                .client
                                .put(load.url(&counter))
                                .json(&object)
                                .send()
                                .await
                            {
                                Ok(r) if r.status() == 409 => {
                                    conflicts.fetch_add(1, Ordering::Relaxed);
                                }
                                Ok(r) => return (start.elapsed(), r.status().as_u16()),
                                Err(_) => return (start.elapsed(), 0),
                            }
                        }
                    }
                },
            )
            .await;
        let final_value = match self
            .client
            .get(self.url(&format!("{TOPPINGS}/counter")))
            .send()
            .await
        {
            Ok(r) => r
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["spec"]["cost"].as_f64())
                .unwrap_or(-1.0),
            Err(_) => -1.0,
        };
        let acknowledged = result.requests - result.errors.values().sum::<usize>();
        result.extra.insert(
            "conflicts_409".into(),
            json!(conflicts.load(Ordering::Relaxed)),
        );
        result
            .extra
            .insert("acknowledged".into(), json!(acknowledged));
        result
            .extra
            .insert("final_value".into(), json!(final_value));
        result.extra.insert(
            "lost_updates".into(),
            json!(acknowledged as f64 - final_value),
        );
        result
    }

    /// The current resourceVersion of the toppings collection.
    async fn collection_version(&self) -> String {
        let response = self
            .client
            .get(self.url(&format!("{TOPPINGS}?limit=1")))
            .send()
            .await;
        match response {
            Ok(r) => r
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| {
                    v["metadata"]["resourceVersion"]
                        .as_str()
                        .map(str::to_string)
                })
                .unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    /// Opens a JSON watch from `resource_version` and records when each named object's ADDED event arrives.
    async fn watch(
        &self,
        index: usize,
        resource_version: &str,
        arrivals: Arrivals,
    ) -> Result<tokio::task::JoinHandle<()>, String> {
        let url = self.url(&format!(
            "{TOPPINGS}?watch=1&resourceVersion={resource_version}&timeoutSeconds=120"
        ));
        let client = self
            .watch_clients
            .get(index / WATCHES_PER_CONNECTION)
            .unwrap_or(&self.client);
        let response = client.get(url).send().await.map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("watch: {}", response.status()));
        }
        let mut body = response.bytes_stream();
        Ok(tokio::spawn(async move {
            let mut buf = Vec::new();
            while let Some(Ok(chunk)) = body.next().await {
                let now = Instant::now();
                buf.extend_from_slice(&chunk);
                while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(event) = serde_json::from_slice::<Value>(&line)
                        && event["type"] == "ADDED"
                        && let Some(name) = event["object"]["metadata"]["name"].as_str()
                    {
                        arrivals.lock().await.insert(name.to_string(), now);
                    }
                }
            }
        }))
    }

    /// Opens `watchers` watches of the toppings from their current resourceVersion: what each saw, and its task.
    async fn open_watches(
        &self,
        watchers: usize,
    ) -> Result<(Vec<Arrivals>, Vec<tokio::task::JoinHandle<()>>), String> {
        let rv = self.collection_version().await;
        let mut arrivals = Vec::new();
        let mut tasks = Vec::new();
        for index in 0..watchers {
            let map = Arc::new(Mutex::new(HashMap::new()));
            tasks.push(self.watch(index, &rv, map.clone()).await?);
            arrivals.push(map);
        }
        Ok((arrivals, tasks))
    }

    /// Write → event delivered, for one watcher (`watchers == 1`) or many (fan-out).
    pub async fn watch_latency(self: &Arc<Self>, watchers: usize, prefix: &str) -> PhaseResult {
        let name = if watchers == 1 {
            "watch latency".to_string()
        } else {
            format!("watch fan-out ({watchers} watchers)")
        };
        let (arrivals, tasks) = match self.open_watches(watchers).await {
            Ok(opened) => opened,
            Err(e) => return PhaseResult::failed(&name, watchers, 200, e),
        };
        let start = Instant::now();
        let mut sent = BTreeMap::new();
        let mut errors = Vec::new();
        self.progress.start(&name, self.sizes.watch_events);
        for i in 0..self.sizes.watch_events {
            let object = format!("{prefix}-{i}");
            let at = Instant::now();
            let (_, status) = self
                .send(
                    self.client
                        .post(self.url(TOPPINGS))
                        .json(&self.topping(&object, 1.0)),
                )
                .await;
            if status != 201 {
                errors.push((Duration::ZERO, status));
            }
            sent.insert(object, at);
            self.progress.step();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let expected = sent.len() * watchers;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut outcomes = Vec::new();
        loop {
            let mut delivered = 0;
            for map in &arrivals {
                delivered += map
                    .lock()
                    .await
                    .keys()
                    .filter(|k| sent.contains_key(*k))
                    .count();
            }
            if delivered >= expected || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let elapsed = start.elapsed();
        let mut delivered = 0;
        for map in &arrivals {
            for (object, at) in map.lock().await.iter() {
                if let Some(sent_at) = sent.get(object) {
                    outcomes.push((at.saturating_duration_since(*sent_at), 200));
                    delivered += 1;
                }
            }
        }
        for task in tasks {
            task.abort();
        }
        outcomes.extend(errors);
        PhaseResult::from_outcomes(&name, watchers, elapsed, &outcomes, 200)
            .with_deliveries(expected, delivered)
    }

    /// `watchers` watches of the toppings follow while toppings `t-<i>` for every `i` of `range` are created at the
    /// run's concurrency: the creates' latencies, and whether every watcher saw every create.
    pub async fn watched_creates(
        self: &Arc<Self>,
        name: &str,
        watchers: usize,
        range: std::ops::Range<usize>,
    ) -> PhaseResult {
        let (arrivals, tasks) = match self.open_watches(watchers).await {
            Ok(opened) => opened,
            Err(e) => return PhaseResult::failed(name, watchers, 201, e),
        };
        let first = range.start;
        let count = range.len();
        let result = self.create_range(name, range).await;
        let expected = count * watchers;
        let wanted = |name: &String| {
            name.strip_prefix("t-")
                .and_then(|n| n.parse::<usize>().ok())
                .is_some_and(|n| (first..first + count).contains(&n))
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let delivered = loop {
            let mut delivered = 0;
            for map in &arrivals {
                delivered += map.lock().await.keys().filter(|k| wanted(k)).count();
            }
            if delivered >= expected || Instant::now() > deadline {
                break delivered;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        for task in tasks {
            task.abort();
        }
        result.with_deliveries(expected, delivered)
    }

    /// Deletes every object the run created.
    pub async fn delete(self: &Arc<Self>) -> PhaseResult {
        let list = self.client.get(self.url(TOPPINGS)).send().await;
        let names: Vec<String> = match list {
            Ok(r) => r
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["items"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string))
                .collect(),
            Err(_) => Vec::new(),
        };
        let names = Arc::new(names);
        let load = self.clone();
        let n = names.clone();
        self.parallel(
            "delete",
            self.sizes.concurrency,
            names.len(),
            200,
            move |i| {
                let (load, names) = (load.clone(), n.clone());
                async move {
                    load.send(
                        load.client
                            .delete(load.url(&format!("{TOPPINGS}/{}", names[i]))),
                    )
                    .await
                }
            },
        )
        .await
    }
}
