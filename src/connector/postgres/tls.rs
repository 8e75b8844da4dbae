//! TLS to an upstream Postgres: `ssl.mode` and `ssl.root.cert`, as libpq's `sslmode` and
//! `sslrootcert` mean them, over rustls (ring).
//!
//! | `ssl.mode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disabled` | never | - |
//! | `preferred` | if the server offers it, else plain | not checked |
//! | `required` | always (fails against a server without TLS) | not checked; with `ssl.root.cert`, as `verify-ca` (as libpq does) |
//! | `verify-ca` | always | chains to `ssl.root.cert` |
//! | `verify-full` | always | chains to `ssl.root.cert` and names the `hostname` |
//!
//! `ssl.root.cert` is the CA certificate(s) in PEM, as text or as the path of a file (read at
//! each connection, so a rotated file is picked up).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::error::{Error, Result};

/// How connections to the upstream use TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never.
    Disable,
    /// When the server offers it, without checking its certificate.
    Prefer,
    /// Always, without checking the certificate (unless a root certificate is given).
    Require,
    /// Always; the certificate must chain to the root certificate.
    VerifyCa,
    /// Always; the certificate must chain to the root certificate and name the host.
    VerifyFull,
}

impl SslMode {
    /// Reads `ssl.mode` (libpq's and RisingWave's spellings), `disabled` when absent.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        Ok(match value {
            None | Some("disabled" | "disable") => SslMode::Disable,
            Some("preferred" | "prefer") => SslMode::Prefer,
            Some("required" | "require") => SslMode::Require,
            Some("verify-ca" | "verify_ca") => SslMode::VerifyCa,
            Some("verify-full" | "verify_full") => SslMode::VerifyFull,
            Some(other) => {
                return Err(Error::InvalidParameter(format!(
                    "ssl.mode '{other}' is not one of disabled, preferred, required, verify-ca, \
                     verify-full"
                )));
            }
        })
    }

    /// libpq's spelling (`sslmode`).
    pub fn libpq_name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// The spelling used in messages.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disabled",
            SslMode::Prefer => "preferred",
            SslMode::Require => "required",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// A source's TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `ssl.mode`.
    pub mode: SslMode,
    /// `ssl.root.cert`: PEM text or a file path.
    pub root_cert: Option<String>,
}

impl TlsSettings {
    /// Checks the two options together: a root certificate needs a mode that uses it, and the
    /// verifying modes need one, which must hold a certificate.
    pub fn new(mode: SslMode, root_cert: Option<String>) -> Result<Self> {
        match (mode, &root_cert) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(Error::InvalidParameter(format!(
                    "ssl.mode '{}' needs ssl.root.cert: the CA certificate (PEM text or a file \
                     path) the upstream's certificate must chain to",
                    mode.name()
                )));
            }
            (SslMode::Disable | SslMode::Prefer, Some(_)) => {
                return Err(Error::InvalidParameter(format!(
                    "ssl.root.cert is not used with ssl.mode '{}'; use required, verify-ca or \
                     verify-full",
                    mode.name()
                )));
            }
            _ => {}
        }
        let settings = TlsSettings { mode, root_cert };
        if settings.root_cert.is_some() {
            settings.roots()?;
        }
        Ok(settings)
    }

    /// The rustls configuration of a connection to `host`; `None` without TLS.
    pub fn client_config(&self) -> Result<Option<ClientConfig>> {
        if self.mode == SslMode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(tls_error)?;
        let chain = match &self.root_cert {
            None => None,
            Some(_) => Some(
                WebPkiServerVerifier::builder_with_provider(
                    Arc::new(self.roots()?),
                    provider.clone(),
                )
                .build()
                .map_err(tls_error)?,
            ),
        };
        let verifier = Arc::new(Verifier {
            chain,
            check_name: self.mode == SslMode::VerifyFull,
            algorithms: provider.signature_verification_algorithms,
        });
        let config =
            builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
        Ok(Some(config))
    }

    /// The root certificates of `ssl.root.cert`.
    fn roots(&self) -> Result<RootCertStore> {
        let text = self.root_cert.as_deref().unwrap_or_default();
        let pem = if text.trim_start().starts_with("-----BEGIN") {
            text.as_bytes().to_vec()
        } else {
            std::fs::read(text).map_err(|e| {
                Error::InvalidParameter(format!(
                    "ssl.root.cert: cannot read the file '{text}': {e}; give the PEM text or a \
                     readable file"
                ))
            })?
        };
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| {
                Error::InvalidParameter(format!("ssl.root.cert is not valid PEM: {e}"))
            })?;
            roots.add(cert).map_err(|e| {
                Error::InvalidParameter(format!("ssl.root.cert holds an unusable certificate: {e}"))
            })?;
        }
        if roots.is_empty() {
            return Err(Error::InvalidParameter(
                "ssl.root.cert holds no certificate (expected -----BEGIN CERTIFICATE-----)".into(),
            ));
        }
        Ok(roots)
    }
}

fn tls_error(e: impl std::fmt::Display) -> Error {
    Error::Upstream { code: "08001", message: format!("cannot set up TLS: {e}") }
}

/// Checks the server's certificate as the mode says: not at all (no root certificate:
/// `preferred`, `required`), its chain only (`verify-ca`), or its chain and name
/// (`verify-full`). Handshake signatures are always checked.
#[derive(Debug)]
struct Verifier {
    /// The chain check against the root certificates, if there are any.
    chain: Option<Arc<WebPkiServerVerifier>>,
    /// Whether the certificate must name the host.
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        let verified =
            chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verified {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_root_certificates_are_checked_together() {
        assert_eq!(SslMode::parse(None).unwrap(), SslMode::Disable);
        assert_eq!(SslMode::parse(Some("prefer")).unwrap(), SslMode::Prefer);
        assert_eq!(SslMode::parse(Some("verify-full")).unwrap(), SslMode::VerifyFull);
        assert!(matches!(SslMode::parse(Some("on")), Err(Error::InvalidParameter(_))));
        let needs = TlsSettings::new(SslMode::VerifyCa, None).unwrap_err().to_string();
        assert!(needs.contains("needs ssl.root.cert"), "{needs}");
        let unused = TlsSettings::new(SslMode::Prefer, Some("x".into())).unwrap_err();
        assert!(unused.to_string().contains("not used"), "{unused}");
        let missing = TlsSettings::new(SslMode::VerifyFull, Some("/nonexistent/ca.pem".into()));
        assert!(missing.unwrap_err().to_string().contains("cannot read"));
        let garbage = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
        assert!(TlsSettings::new(SslMode::VerifyFull, Some(garbage.into())).is_err());
        let plain = TlsSettings::new(SslMode::Disable, None).unwrap();
        assert!(plain.client_config().unwrap().is_none());
        let any = TlsSettings::new(SslMode::Require, None).unwrap();
        assert!(any.client_config().unwrap().is_some());
    }
}
