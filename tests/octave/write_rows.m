function write_rows(file, m)
%WRITE_ROWS  A matrix as a row-major float64 file (numpy: np.fromfile(file).reshape(rows, cols)).
fid = fopen(file, 'w');
fwrite(fid, double(m).', 'double', 0, 'ieee-le');
fclose(fid);
end
