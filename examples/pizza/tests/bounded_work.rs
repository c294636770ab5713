//! Work per request bounded by its size (issue 36, rows 1, 2 and 6): the server runs as its own process, so that
//! its CPU time (`/proc/<pid>/stat`) and peak RSS (`/proc/<pid>/status`) are the request's alone, and each write
//! verb gets a body of many list items.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";
const TOPPINGS: &str = "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings";

/// The pizza-apiserver binary as a process of its own, on the memory backend.
struct Server {
    child: Child,
    client: kube::Client,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn start(args: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_pizza-apiserver"))
            .args(["--secure-port=0", "--storage-backend=memory"])
            .arg(format!("--data-dir={}", dir.path().display()))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server binary starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.starts_with("pizza-apiserver serving on "), "{first}");
        let kubeconfig =
            kube::config::Kubeconfig::read_from(dir.path().join("kubeconfig")).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let server = Server {
            child,
            client,
            _dir: dir,
        };
        for _ in 0..200 {
            if server
                .send("GET", "/readyz", "text/plain", Vec::new())
                .await
                .0
                == 200
            {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the server did not become ready");
    }

    async fn send(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .body(kube::client::Body::from(body))
            .unwrap();
        let response = self.client.send(request).await.expect("an answer");
        let code = response.status().as_u16();
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .unwrap()
            .to_bytes();
        (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// The process's CPU time so far (user and system).
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        Duration::from_millis(ticks * 1000 / clock_ticks())
    }

    /// A `VmRSS`-like line of `/proc/<pid>/status`, in bytes.
    fn status_bytes(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// Sends a request and measures it: the answer, the CPU time it cost, the peak RSS above the RSS before it,
    /// and the wall time.
    async fn measure(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Measured {
        // Resets the peak RSS (`VmHWM`) to the current RSS.
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
        let rss = self.status_bytes("VmRSS:");
        let cpu = self.cpu();
        let start = Instant::now();
        let (code, status) = self.send(method, path, content_type, body).await;
        let wall = start.elapsed();
        let measured = Measured {
            code,
            status,
            cpu: self.cpu() - cpu,
            rss_growth: self.status_bytes("VmHWM:").saturating_sub(rss),
            wall,
        };
        eprintln!(
            "{method} {path} ({content_type}): {} in {:?}, {:?} of CPU, peak RSS +{} MiB",
            measured.code,
            measured.wall,
            measured.cpu,
            measured.rss_growth >> 20
        );
        measured
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn clock_ticks() -> u64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

struct Measured {
    code: u16,
    status: Value,
    cpu: Duration,
    rss_growth: u64,
    wall: Duration,
}

fn pizza(toppings: Vec<Value>) -> Value {
    json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": {"name": "big"},
        "spec": {"toppings": toppings}
    })
}

fn distinct(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"name": format!("t{i}"), "quantity": 1}))
        .collect()
}

/// A write verb: method, path, content type and the body for `n` toppings.
type Verb = (&'static str, String, &'static str, fn(usize) -> Value);

/// Asserts the CEL rule's refusal of `n` toppings (`n + 1` when a patch adds them to the one a pizza has).
fn refused_by_size(measured: &Measured, n: usize) {
    assert_eq!(measured.code, 422, "{}", measured.status);
    let message = measured.status["message"].as_str().unwrap();
    assert!(
        [n, n + 1]
            .iter()
            .any(|n| message.contains(&format!("at most 10 distinct toppings, this one has {n}"))),
        "{message}"
    );
}

/// Row 2: N toppings with distinct names cost O(N) in create, strategic merge patch and apply (they cost O(N²):
/// the field manager and the strategic merge patch looked each key up by a scan). Four times the toppings may
/// cost at most eight times the CPU (quadratic work costs sixteen times).
#[tokio::test(flavor = "multi_thread")]
async fn distinct_map_list_keys_cost_linear_cpu() {
    let server = Server::start(&[]).await;
    let topping = json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
        "kind": "Topping",
        "metadata": {"name": "salami"},
        "spec": {"cost": 1.0}
    });
    let (code, body) = server
        .send(
            "POST",
            TOPPINGS,
            "application/json",
            serde_json::to_vec(&topping).unwrap(),
        )
        .await;
    assert_eq!(code, 201, "{body}");
    let mut small = pizza(vec![json!({"name": "salami", "quantity": 1})]);
    small["metadata"]["name"] = json!("small");
    let (code, body) = server
        .send(
            "POST",
            PIZZAS,
            "application/json",
            serde_json::to_vec(&small).unwrap(),
        )
        .await;
    assert_eq!(code, 201, "{body}");

    let verbs: [Verb; 3] = [
        (
            "POST",
            format!("{PIZZAS}?dryRun=All"),
            "application/json",
            |n| pizza(distinct(n)),
        ),
        (
            "PATCH",
            format!("{PIZZAS}/small?dryRun=All"),
            "application/strategic-merge-patch+json",
            |n| json!({"spec": {"toppings": distinct(n)}}),
        ),
        (
            "PATCH",
            format!("{PIZZAS}/small?dryRun=All&fieldManager=big"),
            "application/apply-patch+yaml",
            |n| {
                let mut pizza = pizza(distinct(n));
                pizza["metadata"]["name"] = json!("small");
                pizza
            },
        ),
    ];
    const N: usize = 5_000;
    for (method, path, content_type, body) in verbs {
        let mut cpu = Vec::new();
        for n in [N, 4 * N] {
            let measured = server
                .measure(
                    method,
                    &path,
                    content_type,
                    serde_json::to_vec(&body(n)).unwrap(),
                )
                .await;
            refused_by_size(&measured, n);
            cpu.push(measured.cpu);
        }
        let ratio = cpu[1].as_secs_f64() / cpu[0].as_secs_f64().max(0.01);
        assert!(
            ratio < 8.0,
            "{method} {content_type}: {N} toppings cost {:?} of CPU, {} cost {:?} (×{ratio:.1})",
            cpu[0],
            4 * N,
            cpu[1]
        );
    }
}
