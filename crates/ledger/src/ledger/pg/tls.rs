//! TLS to the PostgreSQL server (rustls, the `ring` provider), as `sslmode` says: `disable`
//! none; `prefer` and `require` encryption without a certificate check (libpq's meaning), but
//! `require` with `sslrootcert` checks the chain as `verify-ca` does; `verify-ca` the chain
//! against `sslrootcert` or the platform's roots; `verify-full` the chain and the host name.

use crate::ledger::location::{PgUrl, SslMode};
use crate::ledger::LedgerError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use std::sync::Arc;

/// The largest `sslrootcert` read.
const MAX_ROOTS_FILE: u64 = 4 << 20;

fn tls_error(why: impl std::fmt::Display) -> LedgerError {
    LedgerError::Tls(why.to_string())
}

/// The connector for `url` and the `sslmode` tokio-postgres is given.
pub(super) fn connector(
    url: &PgUrl,
) -> Result<
    (
        tokio_postgres_rustls::MakeRustlsConnect,
        postgres::config::SslMode,
    ),
    LedgerError,
> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let check_chain = match url.sslmode {
        SslMode::Disable | SslMode::Prefer => false,
        SslMode::Require => url.sslrootcert.is_some(),
        SslMode::VerifyCa | SslMode::VerifyFull => true,
    };
    let verifier: Arc<dyn ServerCertVerifier> = if check_chain {
        let roots = Arc::new(roots(url)?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(tls_error)?;
        Arc::new(Checked {
            inner: webpki,
            check_name: url.sslmode == SslMode::VerifyFull,
        })
    } else {
        Arc::new(Unchecked(provider.clone()))
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    let mode = match url.sslmode {
        SslMode::Disable => postgres::config::SslMode::Disable,
        SslMode::Prefer => postgres::config::SslMode::Prefer,
        _ => postgres::config::SslMode::Require,
    };
    Ok((tokio_postgres_rustls::MakeRustlsConnect::new(config), mode))
}

/// `sslrootcert`'s certificates, or the platform's roots.
fn roots(url: &PgUrl) -> Result<RootCertStore, LedgerError> {
    let mut store = RootCertStore::empty();
    match &url.sslrootcert {
        Some(file) => {
            let pem = ptd_sys::fs::read_file(file, MAX_ROOTS_FILE)
                .map_err(|e| tls_error(format!("sslrootcert cannot be read: {e}")))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| tls_error(format!("sslrootcert: {e}")))?;
                store
                    .add(cert)
                    .map_err(|e| tls_error(format!("sslrootcert: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let _ = store.add_parsable_certificates(found.certs);
        }
    }
    if store.is_empty() {
        return Err(tls_error("no root certificate to check the server against"));
    }
    Ok(store)
}

/// `verify-ca` / `verify-full`: webpki's check, the name's part only for `verify-full`.
#[derive(Debug)]
struct Checked {
    inner: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for Checked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(Error::InvalidCertificate(
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
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// `prefer` / `require`: encryption, any certificate (the handshake's signatures still
/// checked).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
