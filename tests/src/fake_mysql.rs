//! A scripted MySQL server for what this machine cannot run: a Group Replication member. It
//! accepts any login, answers COM_PING, answers the monitor's Group Replication query with the
//! state the test sets, answers other SELECTs with its own port (so a test sees where a client
//! query went), and everything else with OK.

use sluice_mysql_proto::consts::{cap, com, status};
use sluice_mysql_proto::framing::{PacketReader, packet};
use sluice_mysql_proto::handshake::Greeting;
use sluice_mysql_proto::packets::{err_payload, ok_payload};
use sluice_mysql_proto::resultset::{ColType, ResultShape, text_result};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// The member state the fake reports: (MEMBER_STATE, MEMBER_ROLE, transactions behind).
pub type GroupState = Arc<Mutex<(String, String, u64)>>;

/// A running fake member; it stops with the test process.
pub struct FakeGroupMember {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// What it reports; change it to drive the test.
    pub state: GroupState,
}

impl FakeGroupMember {
    /// Starts a member reporting `state`/`role`, on its own thread and runtime.
    pub fn start(state: &str, role: &str) -> FakeGroupMember {
        let shared: GroupState = Arc::new(Mutex::new((state.into(), role.into(), 0)));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind fake member");
        let port = listener.local_addr().expect("addr").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let st = shared.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("listener");
                let mut id = 0u32;
                while let Ok((tcp, _)) = listener.accept().await {
                    id += 1;
                    tokio::spawn(serve(tcp, id, port, st.clone()));
                }
            });
        });
        FakeGroupMember {
            port,
            state: shared,
        }
    }

    /// Changes what the member reports.
    pub fn set(&self, state: &str, role: &str, behind: u64) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = (state.into(), role.into(), behind);
    }
}

async fn serve(mut tcp: TcpStream, id: u32, port: u16, state: GroupState) {
    let greeting = Greeting {
        server_version: "8.0.36-fake-group-replication".into(),
        connection_id: id,
        nonce: b"abcdefghijklmnopqrst".to_vec(),
        capabilities: cap::LONG_PASSWORD
            | cap::PROTOCOL_41
            | cap::SECURE_CONNECTION
            | cap::PLUGIN_AUTH
            | cap::CONNECT_WITH_DB
            | cap::TRANSACTIONS
            | cap::MULTI_RESULTS,
        mariadb_capabilities: 0,
        charset: 45,
        status: status::AUTOCOMMIT,
        auth_plugin: "mysql_native_password".into(),
    };
    let mut reader = PacketReader::new(16 << 20);
    if tcp.write_all(&packet(0, &greeting.encode())).await.is_err() {
        return;
    }
    let Ok(login) = reader.read(&mut tcp).await else {
        return;
    };
    let ok = |seq: u8| packet(seq, &ok_payload(0, 0, status::AUTOCOMMIT, 0));
    if tcp.write_all(&ok(login.seq.wrapping_add(1))).await.is_err() {
        return;
    }
    while let Ok(pk) = reader.read(&mut tcp).await {
        let seq = pk.seq.wrapping_add(1);
        let reply = match pk.payload.first().copied() {
            Some(com::QUIT) | None => return,
            Some(com::QUERY) => {
                let sql = String::from_utf8_lossy(&pk.payload[1..]).to_ascii_lowercase();
                if sql.contains("replication_group_members") {
                    let (s, r, behind) = state.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    text_result(
                        seq,
                        ResultShape::default(),
                        status::AUTOCOMMIT,
                        &[
                            ("MEMBER_STATE", ColType::Text),
                            ("MEMBER_ROLE", ColType::Text),
                            ("transactions_behind", ColType::UnsignedBigint),
                        ],
                        &[vec![Some(s), Some(r), Some(behind.to_string())]],
                    )
                } else if sql.trim_start().starts_with("select") {
                    text_result(
                        seq,
                        ResultShape::default(),
                        status::AUTOCOMMIT,
                        &[("port", ColType::UnsignedBigint)],
                        &[vec![Some(port.to_string())]],
                    )
                } else {
                    ok(seq)
                }
            }
            Some(com::PING | com::INIT_DB | com::RESET_CONNECTION) => ok(seq),
            Some(other) => packet(
                seq,
                &err_payload(1047, "08S01", &format!("fake member: command {other:#x}")),
            ),
        };
        if tcp.write_all(&reply).await.is_err() {
            return;
        }
    }
}
