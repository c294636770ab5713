//! TLS to etcd with client certificates, all generated here with rcgen: etcd serves HTTPS with
//! `--client-cert-auth`, the store connects through the upstream flags `--etcd-cafile/--etcd-certfile/--etcd-keyfile`.

use crate::support;

use std::path::{Path, PathBuf};

use apiserver::storage::{EventType, GetOptions, Storage, WatchOptions};
use apiserver_storage_etcd::etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};
use apiserver_storage_etcd::{EtcdConfig, EtcdOptions, EtcdStorage, TlsFiles};
use bytes::Bytes;
use futures::StreamExt;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use support::{EtcdServer, ServerTls};

struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn write(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, pem).expect("write pem");
    p
}

/// A CA, a serving certificate for 127.0.0.1/localhost and a client certificate, as PEM files in `dir`.
fn pki(dir: &Path) -> Pki {
    let ca_key = KeyPair::generate().expect("key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.distinguished_name
        .push(DnType::CommonName, "etcd-test-ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = Issuer::new(ca, ca_key);

    let leaf = |sans: Vec<String>, cn: &str, usage: ExtendedKeyUsagePurpose| {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(sans).expect("params");
        p.distinguished_name.push(DnType::CommonName, cn);
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![usage];
        let cert = p.signed_by(&key, &issuer).expect("sign");
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "etcd",
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (client_cert, client_key) = leaf(vec![], "apiserver", ExtendedKeyUsagePurpose::ClientAuth);
    Pki {
        ca: write(dir, "ca.pem", &ca_cert.pem()),
        server_cert: write(dir, "server.pem", &server_cert),
        server_key: write(dir, "server-key.pem", &server_key),
        client_cert: write(dir, "client.pem", &client_cert),
        client_key: write(dir, "client-key.pem", &client_key),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pki = pki(dir.path());
    let read = |p: &Path| std::fs::read(p).expect("read pem");
    let probe = ConnectOptions::new().with_tls(
        TlsOptions::new()
            .ca_certificate(Certificate::from_pem(read(&pki.ca)))
            .identity(Identity::from_pem(
                read(&pki.client_cert),
                read(&pki.client_key),
            )),
    );
    let etcd = EtcdServer::start_tls(
        ServerTls {
            ca: pki.ca.clone(),
            cert: pki.server_cert.clone(),
            key: pki.server_key.clone(),
        },
        probe,
    )
    .await;
    assert!(etcd.url().starts_with("https://"));

    let opts = EtcdOptions {
        etcd_servers: vec![etcd.url()],
        etcd_cafile: Some(pki.ca.clone()),
        etcd_certfile: Some(pki.client_cert.clone()),
        etcd_keyfile: Some(pki.client_key.clone()),
        etcd_compaction_interval: std::time::Duration::ZERO,
    };
    let store = EtcdStorage::from_options(&opts, "/registry/tls")
        .await
        .expect("connect");
    store.readiness().await.expect("ready over TLS");
    let start = store.current_revision().await.expect("rev");
    let mut w = store
        .watch(
            "/registry/tls/things",
            &WatchOptions {
                resource_version: Some(start),
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("watch");
    let o = store
        .create("/registry/tls/things/a", Bytes::from_static(b"{}"))
        .await
        .expect("create");
    assert_eq!(
        store
            .get("/registry/tls/things/a", &GetOptions::default())
            .await
            .expect("get"),
        o
    );
    let ev = tokio::time::timeout(std::time::Duration::from_secs(60), w.next())
        .await
        .expect("event in time")
        .expect("event");
    assert_eq!((ev.event_type, ev.revision), (EventType::Added, o.revision));

    // Without a client certificate etcd refuses the connection.
    let anonymous = EtcdStorage::connect(EtcdConfig {
        tls: Some(TlsFiles {
            ca_file: Some(pki.ca.clone()),
            identity: None,
        }),
        compaction_interval: None,
        ..EtcdConfig::new([etcd.url()], "/registry/tls")
    })
    .await
    .expect("lazy connect");
    assert!(anonymous.readiness().await.is_err());

    // A key without a certificate is a configuration error.
    let bad = EtcdOptions {
        etcd_certfile: None,
        ..opts
    };
    assert!(EtcdStorage::from_options(&bad, "/r").await.is_err());
}
