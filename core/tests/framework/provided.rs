//! Provided resources through the API's router: a provider that follows its objects' changes (as metrics-server's
//! in-memory store could) answers `watch` with the framing, media types, selectors, bookmarks and timeouts of a
//! stored resource's watch; one that does not is 405 on watch, as before.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver::admission::Chain;
use apiserver::codec::{decode_protobuf, decode_protobuf_watch_event};
use apiserver::endpoints::{Api, Provider};
use apiserver::futures::StreamExt;
use apiserver::meta::ObjectMeta;
use apiserver::registry::{
    ApiError, ListRequest, ObjectList, WatchChange, WatchChanges, WatchItem,
};
use apiserver::request::RequestInfoFactory;
use apiserver::runtime::ResourceCodec;
use apiserver::storage::EventType;
use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::broadcast;
use tower::ServiceExt;

mod metrics {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "metrics.example.com", kind = "Gauge")]
    pub struct Gauge {
        pub metadata: ObjectMeta,
        pub value: i64,
    }
}

mod v1 {
    use apiserver::meta::ObjectMeta;

    #[apiserver::served(hub = "super::metrics::Gauge", version = "v1")]
    pub struct Gauge {
        pub metadata: ObjectMeta,
        pub value: i64,
    }
}

use metrics::Gauge;

/// Gauges in memory, with a revision per change and a channel of changes.
struct Gauges {
    state: Mutex<(u64, Vec<Gauge>)>,
    changes: broadcast::Sender<WatchChange<Gauge>>,
    watches: bool,
}

impl Gauges {
    fn new(watches: bool) -> Arc<Self> {
        Arc::new(Gauges {
            state: Mutex::new((0, Vec::new())),
            changes: broadcast::channel(64).0,
            watches,
        })
    }

    /// Sets a gauge (adds it when new) with a `tier` label.
    fn set(&self, name: &str, tier: &str, value: i64) {
        let mut state = self.state.lock().unwrap();
        state.0 += 1;
        let gauge = Gauge {
            metadata: ObjectMeta {
                name: name.into(),
                resource_version: state.0.to_string(),
                labels: [("tier".to_string(), tier.to_string())].into(),
                ..ObjectMeta::default()
            },
            value,
        };
        let previous = state.1.iter().position(|g| g.metadata.name == name);
        let change = match previous {
            Some(i) => WatchChange {
                previous: Some(std::mem::replace(&mut state.1[i], gauge.clone())),
                item: WatchItem::Object(EventType::Modified, gauge),
            },
            None => {
                state.1.push(gauge.clone());
                WatchItem::Object(EventType::Added, gauge).into()
            }
        };
        let _ = self.changes.send(change);
    }

    fn bookmark(&self) {
        let revision = self.state.lock().unwrap().0;
        let _ = self.changes.send(
            WatchItem::Bookmark {
                resource_version: revision,
                initial_events_end: false,
            }
            .into(),
        );
    }
}

#[apiserver::async_trait]
impl Provider<Gauge> for Arc<Gauges> {
    async fn get(&self, _: Option<&str>, name: &str) -> Result<Option<Gauge>, ApiError> {
        let state = self.state.lock().unwrap();
        Ok(state.1.iter().find(|g| g.metadata.name == name).cloned())
    }

    async fn list(&self, _: Option<&str>) -> Result<ObjectList<Gauge>, ApiError> {
        let state = self.state.lock().unwrap();
        let mut list = ObjectList::from(state.1.clone());
        if self.watches {
            list.metadata.resource_version = state.0.to_string();
        }
        Ok(list)
    }

    fn watches(&self) -> bool {
        self.watches
    }

    /// Changes from now on; the current gauges first unless a resourceVersion was given.
    async fn watch(
        &self,
        _: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchChanges<Gauge>, ApiError> {
        let receiver = self.changes.subscribe();
        let initial: Vec<WatchChange<Gauge>> = match request.resource_version {
            Some(_) => Vec::new(),
            None => self
                .state
                .lock()
                .unwrap()
                .1
                .iter()
                .cloned()
                .map(|g| WatchItem::Object(EventType::Added, g).into())
                .collect(),
        };
        let changes = apiserver::futures::stream::unfold(receiver, |mut receiver| async move {
            let change = receiver.recv().await.ok()?;
            Some((change, receiver))
        });
        Ok(apiserver::futures::stream::iter(initial)
            .chain(changes)
            .boxed())
    }
}

fn router(gauges: &Arc<Gauges>) -> Router {
    let codec = ResourceCodec::<Gauge>::new().version::<v1::Gauge>();
    Api::new(Chain::default())
        .provided(codec, gauges.clone())
        .router()
        .layer(axum::middleware::map_request(
            |mut request: Request<Body>| async move {
                let info = RequestInfoFactory::default()
                    .parse(request.method(), request.uri())
                    .expect("request info");
                request.extensions_mut().insert(info);
                request
            },
        ))
}

const GAUGES: &str = "/apis/metrics.example.com/v1/gauges";

async fn get(router: &Router, path: &str, accept: &str) -> (u16, http::HeaderMap, Body) {
    let response = router
        .clone()
        .oneshot(
            Request::get(path)
                .header("accept", accept)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    (parts.status.as_u16(), parts.headers, body)
}

async fn bytes(body: Body) -> Vec<u8> {
    body.collect().await.unwrap().to_bytes().to_vec()
}

/// Reads watch lines until `count` events came (or fails after five seconds).
async fn json_events(body: &mut Body, count: usize) -> Vec<Value> {
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while buf.iter().filter(|b| **b == b'\n').count() < count {
            let frame = body.frame().await.expect("open").expect("readable");
            if let Ok(data) = frame.into_data() {
                buf.extend_from_slice(&data);
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{count} events, got {}", String::from_utf8_lossy(&buf)));
    String::from_utf8_lossy(&buf)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn summary(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                e["object"]["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect()
}

/// A provider that does not watch is served as before: get and list, watch 405, no list resourceVersion.
#[tokio::test]
async fn a_provider_without_watch_answers_405() {
    let gauges = Gauges::new(false);
    gauges.set("cpu", "gold", 1);
    let router = router(&gauges);
    let (code, _, body) = get(&router, GAUGES, "application/json").await;
    assert_eq!(code, 200);
    let list: Value = serde_json::from_slice(&bytes(body).await).unwrap();
    assert_eq!(list["items"][0]["metadata"]["name"], "cpu");
    assert!(list["metadata"].get("resourceVersion").is_none(), "{list}");
    for path in [
        format!("{GAUGES}?watch=true"),
        "/apis/metrics.example.com/v1/watch/gauges".to_string(),
    ] {
        let (code, _, body) = get(&router, &path, "application/json").await;
        let status: Value = serde_json::from_slice(&bytes(body).await).unwrap();
        assert_eq!(code, 405, "{path}: {status}");
        assert_eq!(status["reason"], "MethodNotAllowed");
    }
}

/// A watching provider: the list's resourceVersion, then a watch from it in JSON lines; a label selector turns a
/// gauge that starts matching into ADDED and one that stops into DELETED; bookmarks only when asked for.
#[tokio::test]
async fn a_watching_provider_streams_changes_through_selectors() {
    let gauges = Gauges::new(true);
    gauges.set("cpu", "gold", 1);
    gauges.set("disk", "tin", 2);
    let router = router(&gauges);
    let (_, _, body) = get(&router, GAUGES, "application/json").await;
    let list: Value = serde_json::from_slice(&bytes(body).await).unwrap();
    assert_eq!(list["metadata"]["resourceVersion"], "2");

    let (code, headers, mut all) = get(
        &router,
        &format!("{GAUGES}?watch=true&resourceVersion=2&allowWatchBookmarks=true"),
        "application/json",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(headers["content-type"], "application/json");
    let (_, _, mut gold) = get(
        &router,
        &format!("{GAUGES}?watch=true&resourceVersion=2&labelSelector=tier%3Dgold"),
        "application/json",
    )
    .await;
    gauges.set("disk", "gold", 3); // starts matching
    gauges.bookmark();
    gauges.set("cpu", "tin", 4); // stops matching
    gauges.set("cpu", "tin", 5); // still does not
    gauges.set("disk", "gold", 6);

    let events = json_events(&mut all, 5).await;
    assert_eq!(
        summary(&events),
        [
            ("MODIFIED", "disk", "3"),
            ("BOOKMARK", "", "3"),
            ("MODIFIED", "cpu", "4"),
            ("MODIFIED", "cpu", "5"),
            ("MODIFIED", "disk", "6"),
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    assert_eq!(events[0]["object"]["apiVersion"], "metrics.example.com/v1");
    assert_eq!(events[0]["object"]["kind"], "Gauge");
    assert_eq!(events[1]["object"]["kind"], "Gauge");

    let events = json_events(&mut gold, 3).await;
    assert_eq!(
        summary(&events),
        [
            ("ADDED", "disk", "3"),
            ("DELETED", "cpu", "4"),
            ("MODIFIED", "disk", "6")
        ]
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
    );
    // The DELETED object is the gauge as it last matched.
    assert_eq!(events[1]["object"]["metadata"]["labels"]["tier"], "gold");
}

/// Protobuf frames, `timeoutSeconds`, and the watch of one object by its path.
#[tokio::test]
async fn a_watching_provider_frames_protobuf_and_times_out() {
    let gauges = Gauges::new(true);
    gauges.set("cpu", "gold", 1);
    gauges.set("disk", "tin", 2);
    let router = router(&gauges);
    let (code, headers, body) = get(
        &router,
        "/apis/metrics.example.com/v1/watch/gauges/disk?timeoutSeconds=1",
        "application/vnd.kubernetes.protobuf;stream=watch",
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(
        headers["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    // The stream ends by itself after a second, with the initial event of `disk` only.
    let all = tokio::time::timeout(Duration::from_secs(5), bytes(body))
        .await
        .expect("the watch ends after timeoutSeconds");
    let len = u32::from_be_bytes(all[..4].try_into().unwrap()) as usize;
    assert_eq!(all.len(), 4 + len, "one frame");
    let (event_type, object) = decode_protobuf_watch_event(&all[4..]).unwrap();
    assert_eq!(event_type, "ADDED");
    let (type_meta, raw) = decode_protobuf(&object).unwrap();
    assert_eq!(type_meta.kind, "Gauge");
    assert_eq!(type_meta.api_version, "metrics.example.com/v1");
    assert!(!raw.is_empty());
}
