//! HTTPS with `--tls-cert`/`--tls-key`: a self-signed certificate made here, HTTP/1.1 and HTTP/2
//! chosen by ALPN.

use reqwest::{StatusCode, Version};

use crate::common::{run, DataDir, Server, BIN};

/// A self-signed certificate for 127.0.0.1 written as PEM files into `dir`; returns its PEM.
fn self_signed(dir: &std::path::Path) -> String {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), ck.signing_key.serialize_pem()).unwrap();
    ck.cert.pem()
}

fn client(cert_pem: &str, http1_only: bool) -> reqwest::Client {
    replicad::install_crypto_provider();
    let mut b =
        reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap());
    if http1_only {
        b = b.http1_only();
    }
    b.build().unwrap()
}

#[tokio::test]
async fn https_serves_http2_and_http1_by_alpn_with_the_given_certificate() {
    let certs = tempfile::tempdir().unwrap();
    let pem = self_signed(certs.path());
    let (cert, key) = (certs.path().join("cert.pem"), certs.path().join("key.pem"));
    let server = Server::start_with(&["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()]);
    assert!(server.base_url.starts_with("https://127.0.0.1:"), "{}", server.base_url);
    let url = server.url("/v1/openapi.json");
    for (http1_only, version) in [(false, Version::HTTP_2), (true, Version::HTTP_11)] {
        let res = client(&pem, http1_only).get(&url).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(res.version(), version);
        let doc: serde_json::Value = res.json().await.unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
    }
    // A client that connects and never starts its handshake does not hold up anyone else.
    let idle = std::net::TcpStream::connect(server.base_url.trim_start_matches("https://")).unwrap();
    let res = client(&pem, false).get(&url).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    drop(idle);
    // A client that does not trust the certificate is refused at the handshake.
    replicad::install_crypto_provider();
    let untrusting = reqwest::Client::builder().build().unwrap();
    assert!(untrusting.get(&url).send().await.is_err());
    // Plain HTTP on the TLS port gets no answer, and the server keeps serving.
    let plain = url.replacen("https://", "http://", 1);
    let answered = reqwest::get(&plain).await.map(|r| r.status().is_success()).unwrap_or(false);
    assert!(!answered);
    let again = client(&pem, false).get(&url).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
}

#[test]
fn a_certificate_without_its_key_is_refused_at_start() {
    let dir = DataDir::new();
    let certs = tempfile::tempdir().unwrap();
    self_signed(certs.path());
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path());
    cmd.arg("--tls-cert").arg(certs.path().join("cert.pem"));
    let out = run(cmd);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-key"), "{err}");
}

#[test]
fn an_unreadable_key_file_is_refused_at_start_naming_the_file() {
    let dir = DataDir::new();
    let certs = tempfile::tempdir().unwrap();
    self_signed(certs.path());
    std::fs::write(certs.path().join("key.pem"), "not a key").unwrap();
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"]).arg(dir.path());
    cmd.arg("--tls-cert").arg(certs.path().join("cert.pem")).arg("--tls-key").arg(certs.path().join("key.pem"));
    let out = run(cmd);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-key") && err.contains("key.pem"), "{err}");
}
